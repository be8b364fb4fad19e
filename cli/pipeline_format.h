// Terminal rendering of pipelines (GET /v1/pipelines, GET /v1/pipelines/{id}). Missing or null
// values print as "-".
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace cli {

// ID NAME STATE STEPS (succeeded/total) CREATED REASON
std::string PipelinesTable(const nlohmann::json& reply);
// A heading line (id, name, state, reason) and one row per step: STEP STATE JOB ATTEMPTS GATE,
// GATE being "value >= threshold" as the driver compared them (with "ok" or "FAILED"), then
// each step's reason.
std::string PipelineDetail(const nlohmann::json& pipeline);
// A gate's values as one cell: "0.5200 >= 0.5100 (eval 0.5400 - 0.03) ok".
std::string GateCell(const nlohmann::json& gate);

}  // namespace cli
