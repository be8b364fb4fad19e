// A job's evaluation results as the API shows them (GET /v1/jobs/{id}/evaluation); schema
// Evaluation of docs/api/openapi.yaml. What an eval job reports is its `eval` event
// (engine/jobs/eval.h, checked by api/job_event_check.cc), not this.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace api::v1 {

// One evaluated task; a later evaluation of the same task replaces it.
struct EvaluationTask {
  std::string task;  // reach | push | pick_place
  int episodes = 0;
  int successes = 0;
  double success_rate = 0;  // 0..1
  double mean_return = 0;
  double mean_length = 0;  // steps per episode
  int64_t checkpoint_step = 0;
  std::string policy = "bc";  // "bc" or "rl"
  bool fp8 = false;
  int64_t evaluated_ms = 0;
  bool operator==(const EvaluationTask&) const = default;
};

struct Evaluation {
  int64_t job_id = 0;
  std::vector<EvaluationTask> tasks;  // empty until the eval job reports
  bool operator==(const Evaluation&) const = default;
};

nlohmann::json ToJson(const Evaluation& e);
// Refuses a field of the wrong type or a missing required one, naming it ("tasks[1].fp8").
common::Result<Evaluation> ParseEvaluation(const nlohmann::json& j);

}  // namespace api::v1
