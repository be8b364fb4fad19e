// Forecasts made for submitted jobs and how they came out (table job_forecasts, migration
// 0020), used through a UnitOfWork like every store (store.h). One row per job: the forecast
// made when it was submitted, and, once the job has started and ended, the differences between
// what was forecast and what happened.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/job_state.h"
#include "common/status.h"

namespace controlplane::service {

struct ForecastRecord {
  int64_t job_id = 0;
  int64_t made_ms = 0;
  std::optional<int64_t> start_ms;   // predicted start; nullopt: none could be predicted
  std::optional<double> run_seconds;  // predicted run time
  std::optional<int64_t> end_ms;     // predicted end
  nlohmann::json detail = nlohmann::json::object();  // the forecast as answered
  // Actual minus predicted, in seconds: positive when the job started (ended) later than
  // forecast. Set when the job started (ended) and a time had been predicted.
  std::optional<double> start_error_seconds;
  std::optional<double> end_error_seconds;
  bool open = true;  // false once the job has ended and the forecast was compared with it
};

// An open forecast with what its job has done since.
struct ForecastOutcome {
  ForecastRecord forecast;
  api::JobState state = api::JobState::kPending;
  std::optional<int64_t> started_ms;
  std::optional<int64_t> finished_ms;
};

class ForecastStore {
 public:
  virtual ~ForecastStore() = default;
  // Writes each row; a job that has a forecast keeps it (a job is forecast once, when submitted).
  virtual common::Status Put(const std::vector<ForecastRecord>& rows) = 0;
  // The rows of `job_ids` that exist, by job id.
  virtual common::Result<std::map<int64_t, ForecastRecord>> ForJobs(
      const std::vector<int64_t>& job_ids) = 0;
  // Up to `limit` open forecasts whose job has started but whose predicted start is not
  // compared yet, or whose job reached a terminal state; by job id. Locked until the unit of work ends, skipping rows
  // another unit holds, so replicas judging at once never judge one twice.
  virtual common::Result<std::vector<ForecastOutcome>> Due(int limit) = 0;
  // Writes the errors and `open` of judged forecasts.
  virtual common::Status Judge(const std::vector<ForecastRecord>& rows) = 0;
};

}  // namespace controlplane::service
