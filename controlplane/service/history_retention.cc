#include "controlplane/service/history_retention.h"

#include <filesystem>

#include "common/log.h"
#include "controlplane/service/fair_share_store.h"
#include "controlplane/service/usage_accounting.h"

namespace controlplane::service {

Result<int> HistoryRetention::Sweep() {
  std::vector<int64_t> ids;
  {
    EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
    EMBODY_ASSIGN_OR_RETURN(found,
                            uow->logs().FinishedWithHistory(clock_() - max_age_ms_, jobs_per_sweep_));
    ids = std::move(found);
  }
  int pruned = 0;
  for (int64_t id : ids) {
    EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
    EMBODY_RETURN_IF_ERROR(uow->logs().PruneHistory(id));
    EMBODY_RETURN_IF_ERROR(uow->Commit());
    // The rows go first: a reader never finds a row whose file is missing. (A crash between the
    // two leaves files no row names, harmless but for their bytes.)
    std::error_code ec;
    std::filesystem::remove_all(files_.JobDir(id), ec);
    if (ec) {
      common::LogWarn("cannot remove a finished job's logs",
                      {{"job", std::to_string(id)}, {"error", ec.message()}});
    }
    ++pruned;
  }
  if (pruned > 0) common::LogInfo("pruned finished jobs' history", {{"jobs", std::to_string(pruned)}});
  return pruned;
}

Result<int64_t> PruneRecords(Database& db, int64_t now_ms, const RecordRetention& r) {
  int64_t deleted = 0;
  if (r.audit_max_age_ms > 0) {
    EMBODY_ASSIGN_OR_RETURN(uow, db.Begin());
    EMBODY_ASSIGN_OR_RETURN(n, uow->audit().DeleteBefore(now_ms - r.audit_max_age_ms,
                                                         r.rows_per_sweep));
    EMBODY_RETURN_IF_ERROR(uow->Commit());
    deleted += n;
  }
  if (r.usage_max_age_ms > 0) {
    EMBODY_ASSIGN_OR_RETURN(uow, db.Begin());
    EMBODY_ASSIGN_OR_RETURN(n, uow->fair_share().DeleteDailyUsageBefore(
                                   UtcDay(now_ms - r.usage_max_age_ms), r.rows_per_sweep));
    EMBODY_RETURN_IF_ERROR(uow->Commit());
    deleted += n;
  }
  if (deleted > 0) common::LogInfo("pruned old audit and usage rows", {{"rows", std::to_string(deleted)}});
  return deleted;
}

}  // namespace controlplane::service
