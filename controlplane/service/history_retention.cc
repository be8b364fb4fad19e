#include "controlplane/service/history_retention.h"

#include <filesystem>

#include "common/log.h"

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

}  // namespace controlplane::service
