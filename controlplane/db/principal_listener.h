// Keeps a replica's PrincipalCache (service/principal_cache.h) true to changes other replicas,
// or an operator at a psql prompt, commit: a dedicated session LISTENs on the channel that
// migration 0017's triggers notify in every transaction that updates or deletes tokens or
// tenants, and each notification clears the cache.
//
// The cache is on only while that session is known to be listening: it is turned on just after
// LISTEN succeeds (so every change committed from then on is heard, and what was committed
// before is read afresh), and off as soon as the session fails, or stays silent to a ping for
// `ping_timeout_ms` (a network partition does not close a socket); then the listener reconnects
// with a backoff and turns the cache on again once it listens. NOTIFY is delivered after the
// notifying transaction commits: another replica refuses a revoked token from the moment the
// notification reaches it (a round trip of the database, milliseconds), while the replica that
// revoked refuses it from its next request (PrincipalWatchedDatabase).
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "controlplane/db/pg.h"
#include "controlplane/service/principal_cache.h"

namespace controlplane::db {

// The channel migration 0017 notifies.
inline constexpr const char* kPrincipalsChannel = "embody_principals";

class PrincipalListener {
 public:
  struct Options {
    int poll_ms = 250;            // longest wait for the socket between checks
    int ping_interval_ms = 1000;  // silence before the session is pinged
    int ping_timeout_ms = 2000;   // a ping unanswered this long: the session is lost
    int reconnect_ms = 500;       // between attempts to listen again
  };
  PrincipalListener(PgPool& pool, service::PrincipalCache& cache, Options options);
  PrincipalListener(PgPool& pool, service::PrincipalCache& cache)
      : PrincipalListener(pool, cache, Options{}) {}
  ~PrincipalListener();  // Stop()

  void Start();
  // Turns the cache off and closes the session.
  void Stop();
  // Notifications heard and times the session was (re)established; for tests and metrics.
  uint64_t notifications() const { return notifications_.load(); }
  uint64_t sessions() const { return sessions_.load(); }
  bool listening() const { return listening_.load(); }

 private:
  void Run();
  // Listens on one session until it fails or Stop(); false when it never started listening.
  bool ListenOnce();
  bool WaitStop(int ms);  // true when stopping

  PgPool& pool_;
  service::PrincipalCache& cache_;
  const Options options_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::atomic<uint64_t> notifications_{0};
  std::atomic<uint64_t> sessions_{0};
  std::atomic<bool> listening_{false};
};

}  // namespace controlplane::db
