// Leader election among server replicas: a session-level PostgreSQL advisory lock held on a
// dedicated connection. Whoever holds it runs the scheduler; if that connection dies the lock is
// released by PostgreSQL and another replica takes over.
//
// The lock alone is not enough: a leader whose session died learns so only at its next check,
// and meanwhile another replica may lead. So taking the lock begins a leadership with a new
// epoch (service/leader_fence.h), and the scheduler's units of work hold that epoch: those of a
// deposed leader are refused.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "controlplane/db/pg.h"

namespace controlplane::db {

class LeaderLock {
 public:
  // `holder` names this replica in scheduler_leader (host and pid by default).
  explicit LeaderLock(PgPool& pool, std::string holder = "");
  ~LeaderLock();
  // The epoch of this process's leadership while it holds the lock; tries to take the lock
  // (and begins a new leadership) when it does not. nullopt: not the leader.
  std::optional<int64_t> TryAcquire();

 private:
  void Drop();  // closes the lock session, which releases the lock if it was held

  PgPool& pool_;
  const std::string holder_;
  std::mutex mu_;
  PGconn* conn_ = nullptr;
  std::optional<int64_t> epoch_;
};

}  // namespace controlplane::db
