// Terminal rendering of pipelines (GET /v1/pipelines, GET /v1/pipelines/{id}, a dry run), read
// with their codec (api/v1/pipeline.h). Null values print as "-".
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "api/v1/pipeline.h"

namespace cli {

// ID NAME STATE STEPS (succeeded/total) CREATED REASON
std::string PipelinesTable(const api::v1::PipelineList& list);
// A heading line (id, name, state, reason) and one row per step: STEP STATE JOB ATTEMPTS GATE,
// GATE being "value >= threshold" as the driver compared them (with "ok" or "FAILED"), then
// each step's reason.
std::string PipelineDetail(const api::v1::Pipeline& pipeline);
// A pipeline's dry run (POST /v1/pipelines?dry_run=true): "admitted (dry run: nothing
// submitted)", the expected end, then STEP KIND NEEDS WAIT RUN START END per step and why a step
// has no prediction.
std::string PipelineDryRunText(const api::v1::PipelineDryRun& dry_run);
// A gate's values as one cell: "0.5200 >= 0.5100 (eval 0.5400 - 0.03) ok".
std::string GateCell(const nlohmann::json& gate);

}  // namespace cli
