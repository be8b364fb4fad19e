// Test fixture for the pg suites of the HTTP layer: ServerFixture (server_fixture.h) on
// a private PostgreSQL, started once per test binary through Server::Start as embody-server
// starts. Suites that test PostgreSQL's own behaviour (restarts, LISTEN/NOTIFY, the pool) reach
// the cluster as `pg_`.
#pragma once

#include <memory>

#include "controlplane/testing/server_fixture.h"
#include "tests/support/pg_harness.h"

namespace controlplane {

class PgServerBackend {
 public:
  static common::Result<std::unique_ptr<Server>> StartOn(ServerOptions& o) {
    pg_ = new embody::testing::PgCluster;
    EMBODY_RETURN_IF_ERROR(pg_->Start());
    o.db = pg_->conninfo();
    return Server::Start(o);
  }
  static void StopStore() {
    delete pg_;
    pg_ = nullptr;
  }

  static inline embody::testing::PgCluster* pg_ = nullptr;
};

using InProcessServerTest = ServerFixture<PgServerBackend>;

}  // namespace controlplane
