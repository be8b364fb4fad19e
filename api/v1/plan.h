// A capacity plan as the API shows it (POST /v1/plan); schemas Plan and PlanSize of
// docs/api/openapi.yaml. The model behind it is the planner's (planner/, docs/planner.md); what
// clients send (PlanRequest) is parsed by the server (planner/plan_request.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace api::v1 {

// Bytes per rank.
struct PlanMemory {
  double params = 0;
  double grads = 0;
  double optimizer = 0;
  double activations = 0;
  bool operator==(const PlanMemory&) const = default;
};

// One requested size: a step's times, its throughput and where its time goes.
struct PlanSize {
  int gpus = 0;
  int nodes = 0;
  double samples_per_rank = 0;
  double step_seconds = 0;
  double compute_seconds = 0;
  double allreduce_seconds = 0;
  double exposed_allreduce_seconds = 0;  // what backward does not hide
  double data_seconds = 0;
  double tokens_per_s = 0;
  double samples_per_s = 0;
  std::optional<double> epoch_seconds;  // nullopt: the workload has no epoch
  double run_seconds = 0;
  double efficiency = 0;   // per-rank throughput vs one full node
  std::string bottleneck;  // compute | communication | data
  double memory_per_rank_bytes = 0;
  PlanMemory memory;
  bool fits_memory = false;
  bool operator==(const PlanSize&) const = default;
};

struct Plan {
  std::string cluster;
  std::string allreduce;
  std::string precision;
  bool fp8_allreduce = false;
  int64_t params = 0;
  double flops_per_token = 0;
  double tokens_per_sample = 0;
  std::vector<PlanSize> sizes;   // one per requested size, in the request's order
  int efficient_up_to_gpus = 0;  // largest ranks_per_node * 2^k with efficiency >= 0.5
  std::optional<int> efficiency_below_half_at_gpus;
  bool operator==(const Plan&) const = default;
};

nlohmann::json ToJson(const Plan& p);
// Refuses a field of the wrong type or a missing required one, naming it ("sizes[1].memory.grads").
common::Result<Plan> ParsePlan(const nlohmann::json& j);

}  // namespace api::v1
