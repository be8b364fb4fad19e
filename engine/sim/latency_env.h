// LatencyVecEnv: a VecEnv whose steps also take the time engine/sim/step_latency.h draws for
// them, so the light built-in tasks stand in for heavy simulators (engine.rl.env_latency).
//
// The wrapped environments run in parallel, as a vectorised simulator's workers do: a Step of
// all of them takes the longest of their latencies, which is the wait a synchronous loop pays
// every step. Environment e's k-th step is keyed (seed, first_env + e, k), so the same global
// environment sees the same schedule whether it is stepped alone (a one-environment LatencyVecEnv
// per thread, asynchronous level 2) or with the others.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "api/job_spec.h"
#include "common/status.h"
#include "engine/sim/step_latency.h"
#include "engine/sim/vec_env.h"

namespace engine::sim {

// The latency model of engine.rl.env_latency for a run of seed `seed`.
common::Result<sim::StepLatency> StepLatencyFromOptions(const api::RlLatencyOptions& latency,
                                                        uint64_t seed);

class LatencyVecEnv final : public VecEnv {
 public:
  LatencyVecEnv(std::unique_ptr<VecEnv> inner, sim::StepLatency latency,
                sim::StepLatency::WaitMode mode, uint64_t first_env);

  int num_envs() const override { return inner_->num_envs(); }
  int action_dim() const override { return inner_->action_dim(); }
  void Reset(uint64_t seed) override { inner_->Reset(seed); }
  // The inner Step, then the longest of this step's latencies.
  common::Status Step(std::span<const float> actions, StepResult* out) override;
  const std::vector<PolicySample>& observations() const override { return inner_->observations(); }
  // Seconds spent waiting on latency so far.
  double waited_seconds() const { return waited_; }

 private:
  std::unique_ptr<VecEnv> inner_;
  sim::StepLatency latency_;
  sim::StepLatency::WaitMode mode_;
  uint64_t first_env_;
  std::vector<uint64_t> steps_;  // per environment
  double waited_ = 0.0;
};

// `env` wrapped in the latency of engine.rl.env_latency when its mean is above 0; `env` itself
// otherwise (no latency changes nothing). first_env: the global index of env's first environment.
common::Result<std::unique_ptr<VecEnv>> WithLatency(std::unique_ptr<VecEnv> env,
                                                    const api::RlLatencyOptions& latency,
                                                    uint64_t seed, uint64_t first_env);

}  // namespace engine::sim
