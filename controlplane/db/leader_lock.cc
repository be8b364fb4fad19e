#include "controlplane/db/leader_lock.h"

#include <unistd.h>

#include "common/log.h"
#include "controlplane/db/stores.h"

namespace controlplane::db {

namespace {
constexpr char kTryLock[] = "SELECT pg_try_advisory_lock(7361000) AS got";

std::string DefaultHolder() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = 0;
  return std::string(host) + ":" + std::to_string(getpid());
}
}  // namespace

LeaderLock::LeaderLock(PgPool& pool, std::string holder)
    : pool_(pool), holder_(holder.empty() ? DefaultHolder() : std::move(holder)) {}

LeaderLock::~LeaderLock() { Drop(); }

void LeaderLock::Drop() {
  if (conn_) PgPool::Close(conn_);
  conn_ = nullptr;
  epoch_.reset();
}

std::optional<int64_t> LeaderLock::TryAcquire() {
  std::lock_guard<std::mutex> lock(mu_);
  if (epoch_) {
    if (Exec(conn_, "SELECT 1").ok()) return epoch_;
    common::LogWarn("lost the scheduler leader connection");
    Drop();
  }
  if (!conn_) {
    auto c = pool_.Connect("embody-scheduler-leader");
    if (!c.ok()) return std::nullopt;
    conn_ = *c;
  }
  auto r = Exec(conn_, kTryLock);
  if (!r.ok()) {
    Drop();
    return std::nullopt;
  }
  if (!r->Bool(0, "got")) return std::nullopt;
  // Waits (up to the session's lock_timeout) for the units of work of the previous leadership
  // that already hold its epoch; from its commit on, any other is refused.
  auto advanced = Exec(conn_, kAdvanceLeaderEpoch, {P(holder_)});
  if (!advanced.ok() || advanced->empty()) {
    common::LogWarn("took the scheduler leader lock but could not begin a leadership",
                    {{"error", advanced.ok() ? "no scheduler_leader row"
                                             : advanced.status().ToString()}});
    Drop();  // releases the lock: another replica, or this one next cycle, tries again
    return std::nullopt;
  }
  epoch_ = advanced->Int(0, "epoch");
  common::LogInfo("this replica is the scheduler leader",
                  {{"epoch", std::to_string(*epoch_)}, {"holder", holder_}});
  return epoch_;
}

}  // namespace controlplane::db
