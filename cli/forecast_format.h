// `embody submit --dry-run`: the server's forecast (POST /v1/jobs?dry_run=true, docs/contracts.md
// "Forecasts") as lines a person reads.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace cli {

// "admitted; starts now on n1 (2 ranks)", the predicted start, run and end, and every reason.
std::string ForecastText(const nlohmann::json& forecast);

}  // namespace cli
