// embody-server assembled. Server::Build wires the services, the scheduler loop, the sweepers and
// the HTTP API onto any implementation of the stores (service/store.h); Server::Start is the
// production start: it connects to PostgreSQL, migrates, and builds the server on the PostgreSQL
// stores (server_pg.cc). main.cc and the pg builds of the HTTP and CLI suites start through
// Start; their default builds are on the in-memory twin (testing/memory_server_fixture.h).
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include "common/status.h"
#include "controlplane/flags.h"
#include "controlplane/http/metrics.h"
#include "controlplane/service/auth.h"
#include "controlplane/service/principal_cache.h"
#include "controlplane/service/store.h"

namespace common::http {
class ServerTls;
}

namespace controlplane {

// What a server is built on. `database` is required; the other parts are optional, and only a
// store that several replicas share (PostgreSQL) has them. Where one is null the server behaves
// as the only user of its store, which is what it then is: nothing else can reach the store.
// Everything referenced here must outlive the server.
struct ServerStore {
  // The state of record.
  service::Database* database = nullptr;
  // Scheduler leadership among the replicas (db/leader_lock.h): the epoch of this replica's
  // leadership, nullopt while another leads. Null: this server always leads, unfenced.
  std::function<std::optional<int64_t>()> try_lead;
  // Starts keeping the principal cache true to changes other replicas commit
  // (db/principal_listener.h), turning it on while they are heard; `stop_principal_feed` ends
  // that, turns it off and lets go of the cache, which the server destroys next. Used with
  // --auth-cache only, both or neither. Null: the server's own commits are the only changes
  // (PrincipalWatchedDatabase clears the cache for them), so the cache is on from the start.
  std::function<void(service::PrincipalCache&)> start_principal_feed;
  std::function<void()> stop_principal_feed;
  // The connection pool's gauges for /metrics. Null: the store has no pool; they stay at 0.
  std::function<http::DbPoolStats()> pool_stats;
  // /readyz beyond serving: the store is reachable at the schema this binary needs, checked at
  // most once a second. Null: ready whenever serving.
  std::function<common::Status()> ready;
};

class Server {
 public:
  // Connects to the PostgreSQL at opts.db, applies the migrations and builds on its stores.
  // Returns once the port is bound and requests are being served.
  static common::Result<std::unique_ptr<Server>> Start(const ServerOptions& opts);
  // Builds on `store` (see ServerStore), whose database holds the current schema already.
  // Bootstraps an empty database. Returns once the port is bound and requests are being served.
  static common::Result<std::unique_ptr<Server>> Build(const ServerOptions& opts,
                                                       const ServerStore& store);
  ~Server();

  int port() const;
  // Tokens created by this start (created == false on an already bootstrapped database).
  const service::BootstrapResult& bootstrap() const;
  // Stops serving and the scheduler; idempotent.
  void Stop();

 private:
  struct Impl;
  // The builder behind Build and Start: `tls` is loaded already, the data directories exist.
  // `owned` (may be null: Build's caller owns the store) is what `store` refers to; the server
  // keeps it until every part built on it has stopped.
  static common::Result<std::unique_ptr<Server>> Assemble(
      const ServerOptions& opts, const ServerStore& store,
      std::shared_ptr<const common::http::ServerTls> tls, std::shared_ptr<void> owned);
  // Loads the certificate (a bad file stops the start before any store is touched) and makes
  // the data directories.
  static common::Result<std::shared_ptr<const common::http::ServerTls>> Prepare(
      const ServerOptions& opts);
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace controlplane
