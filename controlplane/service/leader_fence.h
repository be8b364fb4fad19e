// The scheduler leadership's fence, used through a UnitOfWork like every store (store.h):
// leadership itself is decided outside (db/leader_lock.h: a PostgreSQL advisory lock), but a
// lock alone cannot stop a leader that lost it without noticing (its lock session died between
// two checks) from still writing. Each leadership therefore has an epoch, advanced when it
// begins, and every scheduler unit of work holds its epoch before it writes: a unit of a
// deposed leader fails and commits nothing, and a new leadership's Advance waits until units
// already holding the old epoch have ended. Table scheduler_leader (migration 0011).
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace controlplane::service {

class LeaderFence {
 public:
  virtual ~LeaderFence() = default;
  // Begins a leadership: the epoch goes up by one and the new one is returned. `holder` names
  // the replica, for operators.
  virtual common::Result<int64_t> Advance(const std::string& holder) = 0;
  // Holds `epoch` until the unit of work ends. failed_precondition when it is no longer the
  // current one: the caller is not the leader any more and must not write.
  virtual common::Status Hold(int64_t epoch) = 0;
};

// The error Hold returns; the scheduler loop tells it from other failures.
inline bool IsDeposed(const common::Status& s) {
  return s.code() == common::Code::kFailedPrecondition &&
         s.message().rfind("no longer the scheduler leader", 0) == 0;
}

}  // namespace controlplane::service
