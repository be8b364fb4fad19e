// Leader election among server replicas: a session-level PostgreSQL advisory lock held on a
// dedicated connection. Whoever holds it runs the scheduler; if that connection dies the lock is
// released by PostgreSQL and another replica takes over.
#pragma once

#include <mutex>

#include "controlplane/db/pg.h"

namespace controlplane::db {

class LeaderLock {
 public:
  explicit LeaderLock(PgPool& pool) : pool_(pool) {}
  ~LeaderLock();
  // True while this process holds the lock; tries to take it when it does not.
  bool TryAcquire();

 private:
  PgPool& pool_;
  std::mutex mu_;
  PGconn* conn_ = nullptr;
  bool held_ = false;
};

}  // namespace controlplane::db
