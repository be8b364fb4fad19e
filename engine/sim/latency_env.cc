#include "engine/sim/latency_env.h"

#include <algorithm>

namespace engine::sim {

common::Result<sim::StepLatency> StepLatencyFromOptions(const api::RlLatencyOptions& l,
                                                        uint64_t seed) {
  sim::StepLatencyOptions o;
  o.mean_s = l.mean_ms / 1000.0;
  o.jitter = l.jitter;
  o.tail_probability = l.tail_probability;
  o.tail_alpha = l.tail_alpha;
  o.tail_scale = l.tail_scale;
  o.seed = seed;
  auto made = sim::StepLatency::Create(o);
  if (!made.ok()) {
    // Name the JobSpec's field, not the model's.
    std::string field = made.status().field();
    if (field.rfind("latency.", 0) == 0) field = "engine.rl.env_" + field;
    if (field == "engine.rl.env_latency.mean_s") field = "engine.rl.env_latency.mean_ms";
    return common::InvalidArgument(made.status().message(), field);
  }
  return made;
}

LatencyVecEnv::LatencyVecEnv(std::unique_ptr<VecEnv> inner, sim::StepLatency latency,
                             sim::StepLatency::WaitMode mode, uint64_t first_env)
    : inner_(std::move(inner)),
      latency_(std::move(latency)),
      mode_(mode),
      first_env_(first_env),
      steps_(inner_->num_envs(), 0) {}

common::Status LatencyVecEnv::Step(std::span<const float> actions, StepResult* out) {
  EMBODY_RETURN_IF_ERROR(inner_->Step(actions, out));
  double longest = 0.0;
  for (size_t e = 0; e < steps_.size(); ++e) {
    longest = std::max(longest, latency_.Sample(first_env_ + e, steps_[e]++));
  }
  sim::StepLatency::Wait(longest, mode_);
  waited_ += longest;
  return common::Status::Ok();
}

common::Result<std::unique_ptr<VecEnv>> WithLatency(std::unique_ptr<VecEnv> env,
                                                    const api::RlLatencyOptions& latency,
                                                    uint64_t seed, uint64_t first_env) {
  if (!(latency.mean_ms > 0.0)) return env;
  EMBODY_ASSIGN_OR_RETURN(model, StepLatencyFromOptions(latency, seed));
  const auto mode =
      latency.busy ? sim::StepLatency::WaitMode::kBusy : sim::StepLatency::WaitMode::kSleep;
  return std::unique_ptr<VecEnv>(
      std::make_unique<LatencyVecEnv>(std::move(env), std::move(model), mode, first_env));
}

}  // namespace engine::sim
