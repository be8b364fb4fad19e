#include "controlplane/service/transitions.h"

#include "controlplane/service/dataset_lifecycle.h"

namespace controlplane::service {

using api::JobState;

Status Transition(UnitOfWork& uow, JobRecord& job, JobState to, const std::string& reason,
                  const std::string& actor, int64_t now_ms) {
  const JobState from = job.state;
  if (!api::CanTransition(from, to)) {
    return common::FailedPrecondition(std::string("job is ") + api::JobStateName(from) +
                                      ", cannot become " + api::JobStateName(to));
  }
  job.state = to;
  job.reason = reason;
  job.updated_ms = now_ms;
  if (to == JobState::kRunning && !job.started_ms) job.started_ms = now_ms;
  if (api::IsTerminal(to)) job.finished_ms = now_ms;
  if (to == JobState::kPending) {
    job.started_ms.reset();
    job.exit_code.reset();
  }
  EMBODY_RETURN_IF_ERROR(uow.jobs().Update(job));
  EMBODY_ASSIGN_OR_RETURN(
      id, uow.events().Append(job.id, now_ms, "state",
                              {{"from", api::JobStateName(from)},
                               {"to", api::JobStateName(to)},
                               {"reason", reason},
                               {"actor", actor}}));
  (void)id;
  // Allocations hold slots only while the job may hold processes: SCHEDULED, RUNNING,
  // CANCELLING, RESTARTING (a preempted job keeps its slots until its processes are gone). A
  // finished job keeps the record of where it ran; a requeued one gets a new one.
  if (to == JobState::kPending) {
    EMBODY_RETURN_IF_ERROR(uow.allocations().DeleteForJob(job.id));
  } else if (api::IsTerminal(to)) {
    EMBODY_RETURN_IF_ERROR(uow.allocations().ReleaseForJob(job.id));
    // However the import job ended (its report, a cancel, a time limit, a lost node), its
    // dataset leaves "importing" with it.
    if (job.kind == "import") EMBODY_RETURN_IF_ERROR(FinishDatasetImport(uow, job, now_ms));
  }
  return Status::Ok();
}

}  // namespace controlplane::service
