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
  // Read without locks (heartbeats lock jobs one at a time, in their own order); an overdue job
  // is locked on its own and checked again before it changes.
  EMBODY_ASSIGN_OR_RETURN(live, uow.jobs().ListInStates({api::JobState::kRunning}, false));
  int cancelled = 0;
  auto overdue = [now_ms](const JobRecord& job) {
    const int64_t limit = TimeLimitMillis(job);
    // started_ms: when this attempt's head agent reported it running.
    return limit > 0 && job.started_ms && now_ms - *job.started_ms > limit;
  };
  for (const JobRecord& seen : live) {
    if (!overdue(seen)) continue;
    EMBODY_ASSIGN_OR_RETURN(locked, uow.jobs().Get(seen.id, std::nullopt, /*for_update=*/true));
    if (!locked || locked->state != api::JobState::kRunning || !overdue(*locked)) continue;
    JobRecord& job = *locked;
    const int64_t limit = TimeLimitMillis(job);
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
