// The store of a suite binary built by embody_server_suite (server_test_fixture.h).
#include "controlplane/testing/server_suite_store.h"

namespace controlplane {

bool ServerSuiteOnPostgres() { return true; }

}  // namespace controlplane
