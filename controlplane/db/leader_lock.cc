#include "controlplane/db/leader_lock.h"

#include "common/log.h"

namespace controlplane::db {

namespace {
constexpr char kTryLock[] = "SELECT pg_try_advisory_lock(7361000) AS got";
}

LeaderLock::~LeaderLock() {
  if (conn_) PgPool::Close(conn_);
}

bool LeaderLock::TryAcquire() {
  std::lock_guard<std::mutex> lock(mu_);
  if (held_) {
    if (Exec(conn_, "SELECT 1").ok()) return true;
    common::LogWarn("lost the scheduler leader connection");
    held_ = false;
    PgPool::Close(conn_);
    conn_ = nullptr;
  }
  if (!conn_) {
    auto c = pool_.Connect();
    if (!c.ok()) return false;
    conn_ = *c;
  }
  auto r = Exec(conn_, kTryLock);
  if (!r.ok()) {
    PgPool::Close(conn_);
    conn_ = nullptr;
    return false;
  }
  held_ = r->Bool(0, "got");
  if (held_) common::LogInfo("this replica is the scheduler leader");
  return held_;
}

}  // namespace controlplane::db
