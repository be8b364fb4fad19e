// A pipeline as a tenant writes it (POST /v1/pipelines, docs/pipelines.md): named steps, each a
// JobSpec (or a dataset import, or only a gate), with `needs`, artifacts passed by reference to
// earlier steps, gates on evaluation results and retries. ParsePipelineSpec is its complete
// validation: a spec that parses has unique step names, needs that name existing steps and form
// no cycle, references only to steps the step (transitively) needs and of the right kind, and
// every step's job valid as POST /v1/jobs checks it (api::ParseJobSpec with the references
// replaced by placeholders). The tenant's own limits (priority, sizes) are the service's check.
//
// References inside a step's "job" (the JobSpec parser never sees them: ResolveStepJob replaces
// them with concrete values before the job is submitted through the normal path):
//   "init_from": {"step": S}                      the latest ready checkpoint of S's job
//   "eval": {"checkpoint_from_step": S, ...}      the same, as eval.checkpoint
//   "engine": {"data": {"dataset": {"step": S}}}  the version import step S made, "dataset:N@V"
//   "datasets": [{"step": S}, ...]                 the same, for a command job
// Not here: what happens when (pipeline_driver.h), storage (pipeline_store.h).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/dataset_ref.h"
#include "api/job_spec.h"
#include "common/status.h"

namespace controlplane::service {

inline constexpr int kMaxPipelineSteps = 64;
inline constexpr int kMaxStepRetries = 10;
inline constexpr size_t kMaxPipelineBodyBytes = 1 << 20;

// One side of a gate: a metric of an eval step's stored results.
struct MetricRef {
  std::string step;
  std::string metric;  // success_rate | mean_return | mean_length
  std::string task;    // "" : over every task of the evaluation, weighted by episodes
};

// "when": {"step", "metric", "task"?, "at_least": NUMBER | {"step", "metric", "task"?, "minus"?}}
struct Gate {
  MetricRef value;
  std::optional<double> at_least;      // a fixed threshold
  std::optional<MetricRef> reference;  // or another step's metric ...
  double minus = 0.0;                  // ... minus this margin
};

// "import": {"name", "source"} as POST /v1/datasets takes it (a path source only).
struct ImportStep {
  std::string dataset_name;
  api::ImportSource source;
};

// What a reference asks for.
enum class RefKind { kCheckpoint, kDataset };

struct PipelineStepSpec {
  std::string name;
  std::vector<std::string> needs;
  int retries = 0;
  std::optional<Gate> when;
  nlohmann::json job;                 // the JobSpec with references; null: no job
  std::string job_kind;               // api::JobKindName of the job; "import"; "" (a gate only)
  std::optional<ImportStep> import_step;
  std::vector<std::string> referenced;  // steps named by the job's references (artifacts)
};

struct PipelineSpec {
  std::string name;
  std::vector<PipelineStepSpec> steps;  // in the order given

  // Index of the step named `name`, or -1.
  int Find(const std::string& name) const;
};

common::Result<PipelineSpec> ParsePipelineSpec(const nlohmann::json& j,
                                               const api::SpecLimits& limits);
// Raw request bytes: oversize bodies and malformed JSON are invalid_argument too.
common::Result<PipelineSpec> ParsePipelineSpecText(const std::string& body,
                                                   const api::SpecLimits& limits);

// The value a reference to `step` of `kind` stands for: a checkpoint id (a JSON integer) or a
// dataset reference ("dataset:NAME@VERSION"). An error (not found, not ready) is returned as is.
using ResolveRef =
    std::function<common::Result<nlohmann::json>(const std::string& step, RefKind kind)>;

// `job` with every reference replaced by what `resolve` gives; `field` prefixes error fields.
common::Result<nlohmann::json> ResolveStepJob(const nlohmann::json& job, const ResolveRef& resolve,
                                              const std::string& field);

// The steps `step` needs, directly or through others (indices).
std::vector<bool> TransitiveNeeds(const PipelineSpec& spec, int step);

}  // namespace controlplane::service
