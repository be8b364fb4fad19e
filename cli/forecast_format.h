// `embody submit --dry-run`: the server's forecast (POST /v1/jobs?dry_run=true, docs/contracts.md
// "Forecasts"), read with its codec (api/v1/forecast.h), as lines a person reads.
#pragma once

#include <string>

#include "api/v1/forecast.h"

namespace cli {

// "admitted; starts now on n1 (2 ranks)", the predicted start, run and end, and every reason.
std::string ForecastText(const api::v1::Forecast& forecast);

}  // namespace cli
