#include "controlplane/service/time_limits.h"

#include "common/log.h"
#include "controlplane/service/transitions.h"

namespace controlplane::service {

int64_t TimeLimitMillis(const JobRecord& job) {
  if (!job.spec.is_object()) return 0;
  auto it = job.spec.find("time_limit_seconds");
  if (it == job.spec.end() || !it->is_number_integer()) return 0;
  const int64_t s = it->get<int64_t>();
  return s > 0 ? s * 1000 : 0;
}

Result<int> EnforceTimeLimits(UnitOfWork& uow, int64_t now_ms) {
  EMBODY_ASSIGN_OR_RETURN(live, uow.jobs().ListInStates({api::JobState::kRunning}, true));
  int cancelled = 0;
  for (JobRecord& job : live) {
    const int64_t limit = TimeLimitMillis(job);
    // started_ms: when this attempt's head agent reported it running.
    if (limit == 0 || !job.started_ms || now_ms - *job.started_ms <= limit) continue;
    const std::string why =
        "time limit " + std::to_string(limit / 1000) + " s reached";
    EMBODY_RETURN_IF_ERROR(
        Transition(uow, job, api::JobState::kCancelling, why, "scheduler", now_ms));
    common::LogInfo("job past its time limit", {{"job_id", std::to_string(job.id)}});
    ++cancelled;
  }
  return cancelled;
}

}  // namespace controlplane::service
