// Wall-clock limits of jobs (JobSpec time_limit_seconds): a job RUNNING longer than its limit
// since its attempt started running is cancelled (CANCELLING, reason "time limit N s reached";
// its agent kills it and it ends CANCELLED), as Slurm ends a job at its --time. Run by the
// scheduler loop's leader once per cycle.
#pragma once

#include <cstdint>

#include "controlplane/service/store.h"

namespace controlplane::service {

// The limit of `job` in milliseconds from its spec; 0: none.
int64_t TimeLimitMillis(const JobRecord& job);

// Cancels every job past its limit at `now_ms`; returns how many.
Result<int> EnforceTimeLimits(UnitOfWork& uow, int64_t now_ms);

}  // namespace controlplane::service
