// The JSON face of the planner: POST /v1/plan's body and `embody plan`'s files, parsed and
// validated into the step model's inputs (planner/step_model.h), and a Plan written back.
//
//   {"job": JobSpec, "gpus": [256, 512, 1024], "cluster": {...},
//    "options": {...}, "workload": {...}}
//
// Every error names its field ("cluster.inter.gbps", "job.engine.model.d_model", "gpus[2]"), as
// the jobs API does. Units in JSON are the ones people read off data sheets: GB/s (10^9 bytes),
// microseconds, TFLOP/s, GiB; docs/planner.md lists every field.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/job_spec.h"
#include "api/v1/plan.h"
#include "common/status.h"
#include "planner/step_model.h"

namespace planner {

// Mean context tokens of a sim:reach sample (engine/data/embodied_lengths.h; planner_test checks
// the two agree). A sample also holds action_horizon action tokens.
inline constexpr double kSimReachMeanContextTokens = 72.0;

struct PlanRequest {
  api::JobSpec job;
  std::vector<int> gpus;
  Cluster cluster;
  StepOptions options;
  Workload workload;
};

// "cluster" object; `path` prefixes field names in errors.
common::Result<Cluster> ParseCluster(const nlohmann::json& j, const std::string& path = "cluster");
common::Result<PlanRequest> ParsePlanRequest(const nlohmann::json& body,
                                             const api::SpecLimits& limits);
common::Result<PlanRequest> ParsePlanRequestText(const std::string& body,
                                                 const api::SpecLimits& limits);

// The plan as the API shows it (POST /v1/plan), and its JSON (api::v1::ToJson of it).
api::v1::Plan PlanView(const Plan& plan, const PlanRequest& request);
nlohmann::json PlanToJson(const Plan& plan, const PlanRequest& request);

}  // namespace planner
