// Terminal rendering for the CLI: tables, durations, a progress line for a running job.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/v1/evaluation.h"
#include "api/v1/job.h"
#include "common/status.h"

namespace cli {

// A refusal as the CLI prints it: the server's message, led by the field it names when the
// message does not say it ("resources.nodes: must be at least 1"; the server's messages are
// written to sit next to their field in the dashboard's form).
std::string RefusalText(const common::Status& s);

// Left-aligned columns separated by two spaces; the first row is the header.
std::string FormatTable(const std::vector<std::vector<std::string>>& rows);

// "12.3k", "4.56M": three significant figures with an SI suffix.
std::string HumanNumber(double v);
// A time in milliseconds since the epoch as RFC 3339 in UTC, or "-" when there is none.
std::string TimeText(const std::optional<int64_t>& ms);

// One line for a job: "[#######.............]  35%  step 70/200  loss 0.1234  45.6k tok/s  RUNNING".
// `job` is the Job JSON of GET /v1/jobs/{id}; `width` is the bar's width in characters.
std::string ProgressLine(const nlohmann::json& job, int width = 30);
std::string ProgressLine(const api::v1::Job& job, int width = 30);

// Where the job's launch spent its time (`launch_phases` of GET /v1/jobs/{id}): a heading line
// and one row per phase with its milliseconds and what it covers; "" when the job has none.
std::string LaunchPhasesTable(const nlohmann::json& job);

// The series of GET /v1/jobs/{id}/metrics as a table: STEP, TIME and one column per series,
// one row per step that any series has a point at ("-" where a series has none).
std::string MetricsTable(const nlohmann::json& reply);

// GET /v1/jobs/{id}/evaluation as a table: TASK, EPISODES, SUCCESSES, SUCCESS_RATE,
// MEAN_RETURN, POLICY, STEP; a line saying so when there are no results yet.
std::string EvaluationTable(const api::v1::Evaluation& reply);

// The line `embody watch` ends a job with from its last `eval` event's data: a training run's
// held-out action MSE, or an eval job's success rate per task ("evaluation: push 0.906 (58/64),
// ..."); empty for data of neither form.
std::string EvalEventLine(const nlohmann::json& data);

}  // namespace cli
