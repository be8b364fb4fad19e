// What the pipeline driver decides, one pipeline at a time, inside a unit of work that holds the
// pipeline's row lock (pipelines_service.h runs it and makes the submissions it asks for).
//
// Advance looks at each step and moves it on:
//   running   its job of the latest attempt ended: succeeded; failed with retries left: pending
//             again (a new attempt, a new job); else failed (a cancelled job is not retried).
//   pending   a need failed, was gate_failed, skipped or cancelled: skipped. Every need
//             succeeded: the gate (`when`) is judged on the stored evaluation results (missing
//             results wait up to result_wait_ms after the eval job ended, then gate_failed), then
//             the job's references are resolved (a checkpoint not uploaded yet waits up to
//             artifact_wait_ms after its job ended, then failed), and the resolved JobSpec is put
//             in `submitting` with the attempt's idempotency key: the caller submits it after
//             COMMIT, as the owner, through the normal path. A step with only a gate succeeds
//             when it passes.
// When every step is final the pipeline is succeeded (all succeeded) or failed.
// A cancelling pipeline's steps are cancelled and their live jobs asked to stop; it is
// cancelled once none of its jobs runs.
//
// Never twice: a submission's key is (the pipeline's secret, step, attempt) and its body is kept
// in the row until the job's id is recorded, so a submission retried (a crash after the job's
// COMMIT, another replica) finds the same job through the job store's unique key; a new attempt
// begins only after the previous one's job was recorded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "controlplane/service/pipeline_spec.h"
#include "controlplane/service/pipeline_store.h"
#include "controlplane/service/store.h"

namespace controlplane::service {

struct PipelineDriverOptions {
  int64_t artifact_wait_ms = 15 * 60 * 1000;  // a checkpoint's upload after its job ended
  int64_t result_wait_ms = 2 * 60 * 1000;     // an eval's results after its job ended
};

// A step's job (or import) to submit after the unit of work commits.
struct StepSubmission {
  int64_t pipeline_id = 0;
  int step = 0;     // index in the pipeline's steps
  int attempt = 0;  // 0-based
  std::string key;  // the job's idempotency key
  nlohmann::json body;  // the resolved JobSpec, or {"import": {...}} for an import step
};

// The idempotency key of `step`'s job of `attempt` in pipeline `p`.
std::string StepJobKey(const PipelineRecord& p, const std::string& step, int attempt);

// Moves `p` on (see above); `p` is written back by the caller. Returns the submissions to make.
Result<std::vector<StepSubmission>> AdvancePipeline(UnitOfWork& uow, PipelineRecord& p,
                                                    const PipelineSpec& spec,
                                                    const PipelineDriverOptions& options,
                                                    int64_t now_ms);

// A gate's value: the metric of the job's stored evaluation rows (one task, or every task
// weighted by episodes); nullopt when the job has none for it.
std::optional<double> MetricOf(const std::vector<EvaluationRecord>& rows, const std::string& metric,
                               const std::string& task);

}  // namespace controlplane::service
