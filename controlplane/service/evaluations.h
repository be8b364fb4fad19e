// Kind "eval" in the control plane (docs/eval.md): which checkpoint an eval job evaluates, and
// its results.
//
// At submit, ResolveEvalCheckpoint turns the spec's eval block into init_from, the one way a job
// names a checkpoint (the agent materialises it, the node may read it, CheckInitFrom's rules):
//   eval.checkpoint_from_job   a job of the submitter's tenant; its latest ready checkpoint
//   eval.checkpoint            a checkpoint id of the submitter's tenant
// Another tenant's job or checkpoint is not found (404 naming the field), exactly as one that
// does not exist, so ids of other tenants leak nothing; a job with no ready checkpoint yet is
// failed_precondition (409). A client's own init_from on an eval spec is refused: it would skip
// this resolution.
//
// Results arrive as the job's `eval` event (engine/jobs/eval.h; its fields are checked by
// api/job_event_check.cc before this runs) and are stored per task (job_evaluations).
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/job_spec.h"
#include "api/v1/evaluation.h"
#include "controlplane/service/store.h"

namespace controlplane::service {

Status ResolveEvalCheckpoint(UnitOfWork& uow, int64_t tenant_id, api::JobSpec* spec);

// Stores the per-task rows of an `eval` event that carries "tasks" (events without, such as a
// training job's closing action-MSE event, store nothing here).
Status RecordEvaluationEvent(UnitOfWork& uow, int64_t job_id, const nlohmann::json& data,
                             int64_t time_ms);

// GET /v1/jobs/{id}/evaluation: the job's stored rows as the API shows them (no tasks until
// results arrive).
api::v1::Evaluation EvaluationView(int64_t job_id, const std::vector<EvaluationRecord>& rows);

}  // namespace controlplane::service
