// A pipeline as the API shows it (POST /v1/pipelines, GET /v1/pipelines, GET
// /v1/pipelines/{id}, POST /v1/pipelines/{id}/cancel) and a pipeline's dry run (POST
// /v1/pipelines?dry_run=true); schemas Pipeline, PipelineStep, PipelineList and PipelineDryRun of
// docs/api/openapi.yaml. The rules pipelines follow are the server's (docs/pipelines.md,
// controlplane/service/pipelines_service.h).
//
// Two documents are carried whole: a step's `gate` (what the driver compared, written by it,
// schema PipelineGate) and the pipeline's `spec` (the submission as validated; its parser is the
// server's, controlplane/service/pipeline_spec.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/v1/forecast.h"
#include "common/status.h"

namespace api::v1 {

struct PipelineStep {
  std::string name;
  std::string state;  // pending | running | succeeded | failed | gate_failed | skipped | cancelled
  std::string reason;
  std::optional<std::string> kind;  // the job's kind, "import"; nullopt: a gate only
  std::vector<std::string> needs;
  int retries = 0;
  // The job of each attempt, in order; `attempts` and `job_id` (the latest) are written from it.
  std::vector<int64_t> jobs;
  std::optional<int64_t> dataset_id;  // an import step's dataset version, once it has one
  nlohmann::json gate;                // null until judged
  std::optional<int64_t> started_ms;
  std::optional<int64_t> finished_ms;
  bool operator==(const PipelineStep&) const = default;
};

struct Pipeline {
  int64_t id = 0;
  int64_t tenant_id = 0;
  std::string tenant;
  std::string name;
  std::string state;  // running | cancelling | succeeded | failed | cancelled
  std::string reason;
  std::vector<PipelineStep> steps;     // in the spec's order
  std::optional<nlohmann::json> spec;  // GET and POST only; a listing leaves it out
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
  std::optional<int64_t> finished_ms;
  bool operator==(const Pipeline&) const = default;
};

struct PipelineList {
  std::vector<Pipeline> pipelines;  // newest first, without their specs
  std::optional<std::string> next_cursor;
  bool operator==(const PipelineList&) const = default;
};

// One step of a pipeline's dry run: when it is expected to start and end down the DAG.
struct PipelineStepForecast {
  std::string name;
  std::vector<std::string> needs;
  std::string kind;                  // train, rl, eval, command, import or gate
  std::optional<Forecast> forecast;  // a job step's: its job's, as if submitted now
  std::optional<int64_t> start_ms;
  std::optional<int64_t> end_ms;
  std::optional<std::string> not_predicted;  // why start or end is not predicted
  bool operator==(const PipelineStepForecast&) const = default;
};

// The answer of a dry run (`dry_run` and `admitted` are written, both true: a refused dry run
// is an error).
struct PipelineDryRun {
  std::string name;
  int64_t made_ms = 0;
  std::optional<int64_t> end_ms;  // the last step's expected end; nullopt when any is unknown
  std::vector<PipelineStepForecast> steps;  // in the spec's order
  bool operator==(const PipelineDryRun&) const = default;
};

nlohmann::json ToJson(const Pipeline& p);
nlohmann::json ToJson(const PipelineList& l);
nlohmann::json ToJson(const PipelineDryRun& d);
// Refuse a field of the wrong type or a missing required one, naming it ("steps[1].jobs[0]",
// "steps[0].forecast.made_at").
common::Result<Pipeline> ParsePipeline(const nlohmann::json& j);
common::Result<PipelineList> ParsePipelineList(const nlohmann::json& j);
common::Result<PipelineDryRun> ParsePipelineDryRun(const nlohmann::json& j);

}  // namespace api::v1
