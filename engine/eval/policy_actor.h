// PolicyActor: what closed-loop evaluation (episodes.h) asks of a policy: actions for a batch of
// observations (VecEnv::observations(): context-only PolicySamples).
//
//   FlowPolicyActor      a behaviour-cloned (or FP8-quantised) policy transformer: samples its
//                        action chunk with the flow-matching sampler (inference_steps Euler steps
//                        from seeded noise, as BC trains and evaluates it) and acts with the
//                        chunk's first action; the next step plans again (receding horizon), so
//                        the policy sees every state it causes.
//   GaussianMeanActor    an rl policy (engine/policy/actor_critic.h): the Gaussian head's mean, the
//                        deterministic action PPO's policy converges to.
// Both are deterministic given the observations and `key`.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "engine/model/packed_batch.h"
#include "engine/model/policy_transformer.h"
#include "engine/policy/actor_critic.h"

namespace engine::eval {

class PolicyActor {
 public:
  virtual ~PolicyActor() = default;
  virtual int action_dim() const = 0;
  // actions: (obs.size(), action_dim), row-major. `key` seeds any sampling noise.
  virtual common::Status Act(std::span<const PolicySample> obs, uint64_t key,
                             std::vector<float>* actions) = 0;
};

class FlowPolicyActor final : public PolicyActor {
 public:
  FlowPolicyActor(PolicyTransformer& model, int inference_steps)
      : model_(model), inference_steps_(inference_steps) {}
  int action_dim() const override { return model_.config().action_dim; }
  common::Status Act(std::span<const PolicySample> obs, uint64_t key,
                     std::vector<float>* actions) override;

 private:
  PolicyTransformer& model_;
  int inference_steps_;
  PackedBatch batch_;
  std::vector<float> noise_, chunks_;
};

class GaussianMeanActor final : public PolicyActor {
 public:
  explicit GaussianMeanActor(ActorCritic& policy) : policy_(policy) {}
  int action_dim() const override { return policy_.action_dim(); }
  common::Status Act(std::span<const PolicySample> obs, uint64_t key,
                     std::vector<float>* actions) override;

 private:
  ActorCritic& policy_;
};

}  // namespace engine::eval
