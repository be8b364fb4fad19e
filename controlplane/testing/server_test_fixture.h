// The fixture of the HTTP and CLI suites that run on both stores. Each suite's sources are
// compiled once and linked into two binaries (CMake's embody_server_suite), which differ in one
// function, ServerSuiteOnPostgres(): <name>_test on the in-memory twin (label unit, runs without
// PostgreSQL; server_suite_memory.cc) and <name>_pg_test on PostgreSQL (label pg, started as
// embody-server starts; server_suite_pg.cc).
//
// A case that tests what only PostgreSQL does (its SQL, its notifications, its pool) reaches the
// cluster as `pg_`, is named ...OnPostgres (the in-memory binary's ctest discovery leaves those
// out) and begins with EMBODY_POSTGRES_ONLY() (so that running that binary by hand skips it).
// Suites that test nothing else (restarts, transactions) use InProcessServerTest
// (pg_server_fixture.h) directly.
#pragma once

#include "controlplane/testing/memory_server_fixture.h"
#include "controlplane/testing/pg_server_fixture.h"
#include "controlplane/testing/server_suite_store.h"

namespace controlplane {

// ServerFixture's backend (server_fixture.h), chosen when the suite starts. PgServerBackend's
// statics (`pg_`, `store_pool_`) are its own, null on the in-memory store.
class SuiteServerBackend : public PgServerBackend {
 public:
  static common::Result<std::unique_ptr<Server>> StartOn(ServerOptions& o) {
    return ServerSuiteOnPostgres() ? PgServerBackend::StartOn(o) : MemoryServerBackend::StartOn(o);
  }
  static common::Result<std::unique_ptr<Server>> StartAnother(ServerOptions& o) {
    return ServerSuiteOnPostgres() ? PgServerBackend::StartAnother(o)
                                   : MemoryServerBackend::StartAnother(o);
  }
  static service::Database& Store() {
    return ServerSuiteOnPostgres() ? PgServerBackend::Store() : MemoryServerBackend::Store();
  }
  static void StopStore() {
    if (ServerSuiteOnPostgres()) {
      PgServerBackend::StopStore();
    } else {
      MemoryServerBackend::StopStore();
    }
  }
};

using ServerTest = ServerFixture<SuiteServerBackend>;

}  // namespace controlplane

// The first statement of a case named ...OnPostgres.
#define EMBODY_POSTGRES_ONLY()                     \
  if (!::controlplane::ServerSuiteOnPostgres()) \
  GTEST_SKIP() << "tests what only PostgreSQL does"
