// PlanWatch: running train jobs compared with their plan (docs/planner.md, "Plan against
// actual"). Given the cluster description of this server's nodes (--plan-cluster, the same JSON
// POST /v1/plan takes), it predicts each attempt's step time from the job's spec and the ranks
// of its placement, and follows the step times the job reports:
//   - every stored step event carries `predicted_step_seconds` (the server's, never the job's);
//   - when the measured `step_seconds` stays above `ratio` × the prediction for `steps`
//     consecutive step events, the attempt is flagged once: a `plan_deviation` event and the
//     counter embody_plan_deviations_total. A slow node, a bad placement or a noisy neighbour
//     shows there; a step back under the ratio resets the count.
// Jobs the planner cannot model (a dataset other than sim:reach names no sample length) get no
// prediction and are never flagged. Thread-safe: heartbeats of several nodes call it at once.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "controlplane/service/store.h"

namespace controlplane::service {

struct PlanWatchOptions {
  nlohmann::json cluster;  // a cluster object as POST /v1/plan takes it
  double ratio = 1.5;      // flag when measured > ratio × predicted ...
  int steps = 5;           // ... for this many consecutive step events
};

class PlanWatch {
 public:
  static constexpr const char* kDeviationEvent = "plan_deviation";

  // Validates the cluster (invalid_argument naming the field, "cluster.compute.tflops").
  static common::Result<std::unique_ptr<PlanWatch>> Make(PlanWatchOptions options);

  struct Verdict {
    std::optional<double> predicted_step_seconds;
    // Set once per attempt, on the step event that completes the run of slow steps: the
    // plan_deviation event's data.
    std::optional<nlohmann::json> deviation;
  };
  // One step event of `job` (its current attempt) placed with `ranks` ranks in all.
  Verdict Observe(const JobRecord& job, int ranks, int64_t step,
                  std::optional<double> step_seconds);
  // Attempts flagged since the start.
  uint64_t deviations() const;
  // The prediction for `spec` at `ranks` ranks, or nothing when the planner cannot model it.
  std::optional<double> Predict(const nlohmann::json& spec, int ranks) const;

 private:
  explicit PlanWatch(PlanWatchOptions options) : options_(std::move(options)) {}

  struct Attempt {
    int attempt = -1;
    int ranks = 0;
    std::optional<double> predicted;
    int slow_run = 0;
    int64_t last_step = -1;
    bool flagged = false;
  };
  PlanWatchOptions options_;
  mutable std::mutex mu_;
  std::unordered_map<int64_t, Attempt> jobs_;  // by job id; bounded by kMaxJobs
  uint64_t deviations_ = 0;
};

}  // namespace controlplane::service
