// `embody plan`: the body of POST /v1/plan built from the command's files and flags, and the
// plan as a table. The CLI checks only shapes; the server validates the values.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/v1/plan.h"
#include "common/status.h"

namespace cli {

// "256,512,1024" → {256, 512, 1024}: positive integers separated by commas.
common::Result<std::vector<int>> ParseGpuList(const std::string& text);

// `file_json` is a JobSpec, or a whole plan request ({"job": ..., ...}) whose gpus and cluster
// the flags override. `gpus` empty and `cluster_json` null: taken from the request file.
common::Result<nlohmann::json> PlanBody(const nlohmann::json& file_json,
                                        const std::vector<int>& gpus,
                                        const nlohmann::json& cluster_json);

// One row per size: GPUS NODES STEP EPOCH RUN TOKENS/S EFFICIENCY BOTTLENECK MEM/RANK, then
// where efficiency falls below 50%.
std::string PlanTable(const api::v1::Plan& plan);

// "850 ms", "3.01 s", "12.5 min", "2.55 h"; "-" for null.
std::string HumanDuration(const nlohmann::json& seconds);

}  // namespace cli
