// The one way the server changes a job's state: checks the state machine (api::CanTransition),
// updates the record, writes a `state` event {"from","to","reason","actor"} and, when the job
// leaves the running states, releases its allocations; an import job that ends settles its
// dataset (dataset_lifecycle.h). Runs inside the caller's unit of work.
#pragma once

#include <string>

#include "controlplane/service/store.h"

namespace controlplane::service {

// `job` is updated in place. failed_precondition when the transition is not allowed.
Status Transition(UnitOfWork& uow, JobRecord& job, api::JobState to, const std::string& reason,
                  const std::string& actor, int64_t now_ms);

}  // namespace controlplane::service
