// Which store a suite binary built by embody_server_suite runs on (server_test_fixture.h): one
// definition per binary, server_suite_memory.cc or server_suite_pg.cc.
#pragma once

namespace controlplane {

bool ServerSuiteOnPostgres();

}  // namespace controlplane
