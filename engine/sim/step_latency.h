// StepLatency: a seeded model of how long one environment step takes, so the light built-in
// simulator can stand in for heavy ones (physics engines, renderers) whose step times vary — the
// variance is what leaves a synchronous rollout loop waiting on its slowest environment.
//
// A step's latency is drawn from a mixture:
//   with probability 1 − tail_probability, the body: lognormal with mean `mean_s` and coefficient
//     of variation `jitter` (σ² = ln(1 + jitter²), μ = ln(mean_s) − σ²/2); jitter = 0 gives
//     exactly mean_s;
//   with probability tail_probability, the tail: Pareto with shape tail_alpha and minimum
//     tail_scale · mean_s (P(X > x) = (x_min / x)^alpha), a stall of several steps' worth.
// Each draw is keyed by (seed, env, step) (common::Rng::ForKey(seed, kLatencySalt, env, step)), so
// a schedule is the same whatever order environments are stepped in and however they are split
// between threads or ranks. Draws are capped at max_s, so one stall cannot hang a run.
//
// Wait() spends a latency in one of two ways: kSleep gives the core away (an environment served
// by another machine or process); kBusy spins on the monotonic clock (an environment that
// computes on this core).
#pragma once

#include <cstdint>

#include "common/status.h"

namespace engine::sim {

struct StepLatencyOptions {
  double mean_s = 0.0;            // body mean; 0 with no tail: no latency at all
  double jitter = 0.0;            // body coefficient of variation, ≥ 0
  double tail_probability = 0.0;  // in [0, 1)
  double tail_alpha = 2.0;        // Pareto shape, > 1 (a finite mean)
  double tail_scale = 5.0;        // tail minimum as a multiple of mean_s, ≥ 1
  double max_s = 10.0;            // cap on any draw
  uint64_t seed = 0;
};

class StepLatency {
 public:
  enum class WaitMode { kSleep, kBusy };

  // Bounds every option (invalid_argument naming it).
  static common::Result<StepLatency> Create(const StepLatencyOptions& options);

  // The latency of environment `env`'s step `step`, seconds.
  double Sample(uint64_t env, uint64_t step) const;
  // The expected latency of the mixture before the cap: (1 − p)·mean + p·α·x_min/(α − 1).
  double ExpectedSeconds() const;
  // Spends `seconds`.
  static void Wait(double seconds, WaitMode mode);

  const StepLatencyOptions& options() const { return options_; }

 private:
  explicit StepLatency(const StepLatencyOptions& options);
  StepLatencyOptions options_;
  double mu_ = 0.0, sigma_ = 0.0;
};

}  // namespace engine::sim
