// PPO (clipped surrogate, GAE) with the decoupled-PPO correction for stale data, over batches of
// trajectories. The synchronous loop (sync_ppo.h) and, later, the asynchronous learners call the
// same Update: a learner update is a function of a batch of trajectories.
//
// Per step i of a batch, with π the policy being trained, π_prox the proximal policy and π_b
// the behaviour policy that acted (Hilton et al., "Batch size-invariance for policy
// optimization", decoupled PPO):
//   r_i = exp(log π(a_i) − log π_prox(a_i))
//   w_i = min(exp(log π_prox(a_i) − log π_b(a_i)), importance_cap)      (capped, no gradient)
//   L_policy = −mean_i w_i · min(r_i Â_i, clip(r_i, 1 − ε, 1 + ε) Â_i)
// The synchronous loop has π_prox = π_b (w = 1: plain PPO). Value loss (clipped, as in PPO2's
// reference implementation, when value_clip; plain squared error otherwise):
//   L_value = ½ mean_i max((V_i − R_i)², (V_old,i + clip(V_i − V_old,i, −ε, ε) − R_i)²)
// Total: L_policy + value_coef · L_value − entropy_coef · H. Advantages Â are normalised to zero
// mean and unit variance over the whole batch (over all ranks). K epochs over `minibatches`
// shuffled minibatches; gradients averaged over ranks, clipped to max_grad_norm (global L2),
// then one AdamW step per minibatch.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "common/status.h"
#include "engine/dist/communicator.h"
#include "engine/optim/adamw.h"
#include "engine/policy/actor_critic.h"

namespace engine::rl {

struct PpoConfig {
  double gamma = 0.99;
  double gae_lambda = 0.95;
  double clip = 0.2;
  bool value_clip = true;
  double value_coef = 0.5;
  double entropy_coef = 0.0;
  int epochs = 4;
  int minibatches = 4;
  double lr = 3e-4;
  double weight_decay = 0.0;  // the trunk's; the heads are not decayed
  double max_grad_norm = 0.5;
  double importance_cap = 2.0;
  // Asynchronous learners (async_ppo.h): π_prox of stale steps is the behaviour policy (true) or
  // the learner's current policy (false). The synchronous loop's steps are never stale.
  bool proximal_behaviour = false;
};

// T steps of N environments, row t·N + e. Made by one policy version.
struct Rollout {
  int64_t policy_version = 0;
  int steps = 0, envs = 0, action_dim = 0;
  std::vector<PolicySample> obs;      // (T·N)
  std::vector<float> actions;         // (T·N, A)
  std::vector<float> behaviour_logp;  // (T·N) log π_b(a)
  std::vector<float> values;          // (T·N) V(s) under π_b
  std::vector<float> rewards;         // (T·N)
  std::vector<uint8_t> dones;         // (T·N) the episode ended after this step
  std::vector<float> last_values;     // (N) V of the observation after the last step
};

// GAE(γ, λ) over a (T, N) rollout, per environment backwards in time:
//   δ_t = r_t + γ V_{t+1} (1 − done_t) − V_t,   Â_t = δ_t + γ λ (1 − done_t) Â_{t+1}
// with V_T = last_values; returns R_t = Â_t + V_t. An episode cut by the step limit is treated
// as ended (no bootstrap from its last observation, which the environment has already replaced).
void ComputeGae(const float* rewards, const float* values, const uint8_t* dones,
                const float* last_values, int T, int N, double gamma, double lambda,
                float* advantages, float* returns);

// One step's clipped surrogate (the bracket above, negated, times w) and its derivative with
// respect to log π(a); *clipped is set when the clip is active (derivative 0).
double ClippedSurrogate(double logp, double proximal_logp, double behaviour_logp, double advantage,
                        double clip, double importance_cap, double* d_logp, bool* clipped);
// One step's value loss (½ · the max above, or ½ (V − R)²) and its derivative with respect to V.
double ValueLoss(double value, double old_value, double target, double clip, bool value_clip,
                 double* d_value);

// What Update trains on: steps from one or more rollouts, flattened.
struct PpoBatch {
  std::vector<PolicySample> obs;
  std::vector<float> actions;           // (n, A)
  std::vector<float> behaviour_logp;    // (n)
  std::vector<float> proximal_logp;     // (n)
  std::vector<float> advantages;        // (n), normalised by Update
  std::vector<float> returns;           // (n)
  std::vector<float> values;            // (n) V_old
  std::vector<int64_t> policy_version;  // (n) of the behaviour policy
  int size() const { return static_cast<int>(behaviour_logp.size()); }
};

// Adds `rollout`'s steps to *batch with their GAE advantages and returns; the proximal log-prob
// is the behaviour one (the synchronous case). Moves the observations out of rollout.
void AppendRollout(Rollout&& rollout, const PpoConfig& config, PpoBatch* batch);

struct PpoStats {
  double policy_loss = 0, value_loss = 0, entropy = 0, approx_kl = 0, clip_fraction = 0;
  double grad_norm = 0;
  int minibatches = 0;
  // How far the behaviour policies lag π_prox over the batch (0 for on-policy data):
  // KL(π_b ‖ π_prox) estimated on π_b's own actions as mean (ρ − 1) − log ρ, ρ = π_prox / π_b;
  // the share of steps whose ρ exceeds importance_cap; the mean capped weight w.
  double behaviour_kl = 0, importance_capped = 0, importance_weight = 1;
};

// The behaviour fields of PpoStats over n steps (summed over the ranks of comm).
void BehaviourStats(const float* proximal_logp, const float* behaviour_logp, int n,
                    double importance_cap, Communicator* comm, PpoStats* stats);

// π(a) (log-prob of each step's action) and V(s) of `policy` over a batch of steps, in chunks of
// `chunk` samples.
common::Status EvaluatePolicy(ActorCritic& policy, std::span<const PolicySample> obs,
                              const float* actions, std::vector<float>* logp,
                              std::vector<float>* values, int chunk = 512);

// The mean and standard deviation of the most recent advantages seen, up to `window` per rank,
// pooled over the ranks of comm: the streamed epoch's normalisation (AccumulateStreaming).
class AdvantageWindow {
 public:
  struct Moments {
    double mean = 0, sd = 1;  // sd includes Update's 1e-8
  };
  // Adds adv[0..n) as the newest, drops the oldest beyond `window` (at least n are kept), and
  // returns the moments of what is kept on every rank (every rank calls it: it all-reduces).
  Moments Add(const float* adv, int n, int window, Communicator* comm);
  size_t size() const { return kept_.size(); }

 private:
  std::deque<float> kept_;  // oldest first
};

class PpoLearner {
 public:
  PpoLearner(ActorCritic* policy, const PpoConfig& config, Communicator* comm, uint64_t seed);
  // K epochs over batch (every rank passes a batch of the same size). Errors: a batch not
  // divisible into `minibatches` non-empty minibatches, model errors.
  common::Result<PpoStats> Update(PpoBatch& batch);

  // The same with `epochs` passes instead of the configured number (level 3's later epochs).
  common::Result<PpoStats> Update(PpoBatch& batch, int epochs);

  // Streaming (asynchronous level 3): the first epoch runs as trajectories arrive, with the
  // maths of Update's first epoch wherever the data already in allow it. A global batch (one
  // optimiser step) is accumulated micro-batch by micro-batch. The caller evaluates each
  // micro-batch as the non-streaming learner evaluates its rollout, with the policy as it was
  // when the update began (EvaluatePolicy on a copy; this learner's policy moves with every
  // global batch): rollout.values and rollout.last_values are that critic's (GAE, and V_old of
  // the value clip), and `start_logp` that policy's log π(a): π_prox unless
  // PpoConfig::proximal_behaviour, and what the lag statistics compare with. Advantages are
  // normalised with the mean and deviation of the last `window` advantages streamed (per rank,
  // pooled over ranks; AdvantageWindow): Update uses the whole rollout's, which are not known
  // before its last trajectory, and `window` = the rollout's steps makes the estimate the most
  // recent rollout's worth. The loss (ppo.h's, on the policy now) times `weight` per step (1 /
  // the global batch's steps) has its gradient added to what was accumulated since the last
  // StepAccumulated. The steps, with their raw advantages, returns, V_old and π_prox, are appended
  // to *learned (moving the observations out of rollout): the batch the later epochs run on, the
  // one the non-streaming learner builds. StepAccumulated averages the gradient over ranks, clips
  // it and takes the step.
  common::Status AccumulateStreaming(Rollout&& rollout, std::span<const float> start_logp,
                                     double weight, int window, PpoBatch* learned);
  common::Result<PpoStats> StepAccumulated();

  // π(a) and V(s) of the current policy over a batch of steps (EvaluatePolicy): the proximal
  // policy of decoupled PPO and the critic, evaluated by the learner on stale trajectories.
  common::Status Evaluate(std::span<const PolicySample> obs, const float* actions,
                          std::vector<float>* logp, std::vector<float>* values, int chunk = 512) {
    return EvaluatePolicy(*policy_, obs, actions, logp, values, chunk);
  }

  int64_t updates() const { return updates_; }
  // The learning rate of the optimiser steps from now on (asynchronous learners lower it on
  // stale data); every rank must set the same.
  void set_lr(double lr) { config_.lr = lr; }
  double lr() const { return config_.lr; }

 private:
  // All-reduces the accumulated gradients (mean over ranks), clips them to max_grad_norm and
  // takes one AdamW step; returns the norm before clipping.
  double ApplyGradients();

  ActorCritic* policy_;
  PpoConfig config_;
  Communicator* comm_;
  uint64_t seed_;
  AdamW trunk_opt_, head_opt_;
  int64_t updates_ = 0;
  PpoStats streaming_;  // sums of the micro-batches since the last StepAccumulated
  bool accumulating_ = false;
  AdvantageWindow advantage_window_;
};

}  // namespace engine::rl
