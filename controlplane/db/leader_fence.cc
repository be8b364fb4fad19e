// The scheduler leadership's fence over table scheduler_leader (service/leader_fence.h).
#include "controlplane/db/stores.h"

namespace controlplane::db {

using common::Result;
using common::Status;

namespace {
// FOR SHARE: any number of units of the same leadership hold the row together, and the UPDATE
// that advances the epoch waits until they have all ended (or its lock_timeout fires).
constexpr char kHoldEpoch[] = "SELECT epoch FROM scheduler_leader WHERE id = 1 FOR SHARE";
}  // namespace

Result<int64_t> PgLeaderFence::Advance(const std::string& holder) {
  EMBODY_ASSIGN_OR_RETURN(rows, tx_.Exec(kAdvanceLeaderEpoch, {P(holder)}));
  if (rows.empty()) return common::Internal("scheduler_leader has no row (migration 0011)");
  return rows.Int(0, "epoch");
}

Status PgLeaderFence::Hold(int64_t epoch) {
  EMBODY_ASSIGN_OR_RETURN(rows, tx_.Exec(kHoldEpoch));
  if (rows.empty()) return common::Internal("scheduler_leader has no row (migration 0011)");
  const int64_t current = rows.Int(0, "epoch");
  if (current != epoch) {
    return common::FailedPrecondition("no longer the scheduler leader: leadership " +
                                      std::to_string(epoch) + " was followed by " +
                                      std::to_string(current));
  }
  return Status::Ok();
}

}  // namespace controlplane::db
