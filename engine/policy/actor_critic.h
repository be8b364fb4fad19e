// ActorCritic: the RL policy: the engine's policy transformer (the trunk) with a Gaussian action
// head and a value head beside it (docs/rl.md, "Policy").
//
//   hidden (N, C)   the trunk's final hidden states (PolicyTransformer::final_hidden) on the
//                   observations laid out one per row; the action slots get x = 0 at t = 0
//   mean (n, A)     = mean_w · hidden[first action slot of sample i] + mean_b
//   log_std (A)     learned, state-independent
//   value (n)       = value_w · (mean of hidden over sample i's tokens) + value_b
// The mean head starts as a copy of the trunk's flow-matching action head: on a behaviour-cloned
// trunk, its output at x = 0, t = 0 is the flow's one-step prediction from zero noise, i.e. the
// cloned policy's mean action. The value head starts at 0 and log_std at init_log_std.
//
// Parameters: the trunk's flat buffer (trunk().params()) and the heads' own (heads()), with
// gradients of the same layout. Forward keeps the observations' batch until the next Forward;
// Backward takes the loss's derivatives with respect to mean, log_std and value and accumulates
// every parameter's gradient. Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/status.h"
#include "engine/format/checkpoint.h"
#include "engine/model/policy_transformer.h"

namespace engine {

class ActorCritic {
 public:
  // A trunk Init(seed) from config, heads initialised as above.
  static common::Result<std::unique_ptr<ActorCritic>> Create(const PolicyConfig& config,
                                                             uint64_t seed, float init_log_std);

  // Loads the trunk from a behaviour-cloning checkpoint (engine/format/checkpoint.h) of the same
  // model shape and re-initialises the heads from it. Errors name both shapes.
  common::Status LoadTrunk(const CheckpointData& checkpoint);

  // Runs the policy on obs (context-only samples, vec_env.h). mean() (n, A), value() (n).
  common::Status Forward(std::span<const PolicySample> obs);
  // d_mean (n, A), d_log_std (A), d_value (n): d loss / d outputs of the last Forward.
  common::Status Backward(const float* d_mean, const float* d_log_std, const float* d_value);
  void ZeroGrad();

  int action_dim() const { return trunk_->config().action_dim; }
  const float* mean() const { return mean_.data(); }
  const float* value() const { return value_.data(); }
  const float* log_std() const { return heads_.data() + log_std_; }

  PolicyTransformer& trunk() { return *trunk_; }
  std::vector<float>& heads() { return heads_; }
  std::vector<float>& head_grads() { return head_grads_; }

 private:
  ActorCritic(std::unique_ptr<PolicyTransformer> trunk, float init_log_std);
  void InitHeads();

  std::unique_ptr<PolicyTransformer> trunk_;
  float init_log_std_;
  // Heads' layout: mean_w (A, C), mean_b (A), log_std (A), value_w (C), value_b (1).
  size_t mean_w_ = 0, mean_b_ = 0, log_std_ = 0, value_w_ = 0, value_b_ = 0;
  std::vector<float> heads_, head_grads_;

  PackedBatch batch_;
  std::vector<int32_t> first_action_slot_, begin_slot_, num_tokens_;  // per sample
  std::vector<float> mean_, value_, pooled_;                          // (n, A), (n), (n, C)
  std::vector<float> d_hidden_;                                       // (N, C)
};

// Whether two configs give the same trunk (same parameter layout).
bool SameTrunkShape(const PolicyConfig& a, const nlohmann::json& checkpoint_model);

}  // namespace engine
