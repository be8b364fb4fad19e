// Server::Start: the production start on PostgreSQL. Opens the pool, applies the migrations,
// makes the PostgreSQL stores and the parts only a shared store has (the scheduler's leader lock,
// the listener that keeps the principal cache true to other replicas, the pool's gauges, the
// schema check behind /readyz), and hands them to the same builder Server::Build uses.
#include <memory>

#include "controlplane/db/leader_lock.h"
#include "controlplane/db/migrations.h"
#include "controlplane/db/principal_listener.h"
#include "controlplane/db/stores.h"
#include "controlplane/server.h"

namespace controlplane {

namespace {

// What Start opens; the server keeps it until every part built on it has stopped. Members are
// destroyed in reverse order: the lock and the listener close their sessions before the pool.
struct PgParts {
  std::unique_ptr<db::PgPool> pool;
  std::unique_ptr<db::PgDatabase> database;
  std::unique_ptr<db::LeaderLock> leader;
  // Made by start_principal_feed and destroyed by stop_principal_feed, while the cache it clears
  // exists.
  std::unique_ptr<db::PrincipalListener> principal_listener;
};

}  // namespace

common::Result<std::unique_ptr<Server>> Server::Start(const ServerOptions& opts) {
  // The certificate first: a bad file stops the start before the database is touched.
  EMBODY_ASSIGN_OR_RETURN(tls, Prepare(opts));
  db::PgOptions pg_options;
  pg_options.connect_timeout_s = opts.db_connect_timeout_s;
  pg_options.keepalives_idle_s = opts.db_keepalives_idle_s;
  pg_options.keepalives_interval_s = opts.db_keepalives_interval_s;
  pg_options.keepalives_count = opts.db_keepalives_count;
  pg_options.statement_timeout_ms = opts.db_statement_timeout_ms;
  pg_options.lock_timeout_ms = opts.db_lock_timeout_ms;
  auto pool = db::PgPool::Open(opts.db, opts.db_pool_size, pg_options);
  if (!pool.ok()) return pool.status();
  auto pg = std::make_shared<PgParts>();
  pg->pool = std::move(pool.value());
  auto applied = db::ApplyMigrations(*pg->pool, db::EmbeddedMigrations());
  if (!applied.ok()) return applied.status();
  pg->database = std::make_unique<db::PgDatabase>(*pg->pool);
  pg->leader = std::make_unique<db::LeaderLock>(*pg->pool);

  PgParts* raw = pg.get();
  ServerStore store;
  store.database = pg->database.get();
  store.try_lead = [raw] { return raw->leader->TryAcquire(); };
  store.start_principal_feed = [raw](service::PrincipalCache& cache) {
    raw->principal_listener = std::make_unique<db::PrincipalListener>(*raw->pool, cache);
    raw->principal_listener->Start();
  };
  // Destroyed, not only stopped: it holds the cache, which the server destroys before these parts.
  store.stop_principal_feed = [raw] { raw->principal_listener.reset(); };
  store.pool_stats = [raw] {
    db::PgPoolStats s = raw->pool->Stats();
    return http::DbPoolStats{s.size, s.in_use, s.idle, s.errors};
  };
  // Ready: the database answers (within a second's wait for a connection) at the schema this
  // binary needs.
  store.ready = [raw]() -> common::Status {
    auto v = db::CurrentSchemaVersion(*raw->pool, /*wait_ms=*/1000);
    if (!v.ok()) return v.status();
    const int want = db::EmbeddedMigrations().empty() ? 0 : db::EmbeddedMigrations().back().version;
    // Older: migrating. Newer: a newer replica migrated it; this one must not serve it.
    if (*v != want) {
      return common::Unavailable("schema version " + std::to_string(*v) + ", this binary's " +
                                 std::to_string(want));
    }
    return common::Status::Ok();
  };
  return Assemble(opts, store, std::move(tls), std::move(pg));
}

}  // namespace controlplane
