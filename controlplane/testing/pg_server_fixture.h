// Test fixture for the pg suites of the HTTP layer: ServerFixture (server_fixture.h) on
// a private PostgreSQL, started once per test binary through Server::Start as embody-server
// starts. Suites that test PostgreSQL's own behaviour (restarts, LISTEN/NOTIFY, the pool) reach
// the cluster as `pg_`.
#pragma once

#include <memory>

#include "controlplane/db/stores.h"
#include "controlplane/testing/server_fixture.h"
#include "tests/support/pg_harness.h"

namespace controlplane {

class PgServerBackend {
 public:
  static common::Result<std::unique_ptr<Server>> StartOn(ServerOptions& o) {
    pg_ = new embody::testing::PgCluster;
    EMBODY_RETURN_IF_ERROR(pg_->Start());
    o.db = pg_->conninfo();
    auto server = Server::Start(o);
    if (!server.ok()) return server;
    auto pool = db::PgPool::Open(pg_->conninfo(), 1);
    if (!pool.ok()) return pool.status();
    store_pool_ = pool->release();
    store_ = new db::PgDatabase(*store_pool_);
    return server;
  }
  // Another server on the same store, as a second replica of the first would be.
  static common::Result<std::unique_ptr<Server>> StartAnother(ServerOptions& o) {
    o.db = pg_->conninfo();
    return Server::Start(o);
  }
  // The store the server is built on, for a test that writes what no route writes: the
  // PostgreSQL stores over a connection of their own.
  static service::Database& Store() { return *store_; }
  static void StopStore() {
    delete store_;
    store_ = nullptr;
    delete store_pool_;
    store_pool_ = nullptr;
    delete pg_;
    pg_ = nullptr;
  }

  static inline embody::testing::PgCluster* pg_ = nullptr;
  static inline db::PgPool* store_pool_ = nullptr;
  static inline db::PgDatabase* store_ = nullptr;
};

using InProcessServerTest = ServerFixture<PgServerBackend>;

}  // namespace controlplane
