// The streamed first epoch of asynchronous level 3 (PpoLearner::AccumulateStreaming) against the
// non-streaming learner (PpoLearner::Update) on the same data: the same loss terms, the same
// step, and advantages normalised over the window of recent steps rather than the micro-batch.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "engine/dist/communicator.h"
#include "engine/rl/gaussian.h"
#include "engine/rl/ppo.h"
#include "engine/sim/reach_env.h"

namespace engine::rl {
namespace {

PolicyConfig Tiny() {
  PolicyConfig c;
  c.d_model = 16;
  c.layers = 1;
  c.heads = 2;
  c.mlp = 32;
  c.action_dim = 3;
  c.action_horizon = 1;
  return c;
}

// A (T = 2, N = 2) rollout of reach observations acted by a policy that gave every action
// log-prob `lag` below what `policy` gives it now (a stale behaviour policy); the critic's values
// and the bootstrap values are the given ones (as the update's starting critic gave them).
Rollout StaleRollout(ActorCritic& policy, double lag, uint64_t seed = 11) {
  sim::ReachEnvConfig ec;
  ec.num_envs = 2;
  ec.action_dim = 3;
  ec.cameras = 0;
  auto env = std::move(*sim::ReachVecEnv::Create(ec));
  env->Reset(seed);
  Rollout r;
  r.steps = 2;
  r.envs = 2;
  r.action_dim = 3;
  for (int t = 0; t < 2; ++t) {
    for (const PolicySample& o : env->observations()) r.obs.push_back(o);
  }
  r.actions = {0.1f, -0.2f, 0.3f, 0.0f, 0.2f, -0.1f, -0.3f, 0.1f, 0.0f, 0.2f, 0.2f, 0.2f};
  EXPECT_TRUE(policy.Forward(r.obs).ok());
  for (int i = 0; i < 4; ++i) {
    r.behaviour_logp.push_back(static_cast<float>(
        GaussianLogProb(policy.mean() + i * 3, policy.log_std(), r.actions.data() + i * 3, 3) -
        lag));
  }
  r.values = {0.3f, -0.2f, 0.1f, 0.5f};  // the last step's value clip is active
  r.last_values = {0.2f, -0.1f};
  r.rewards = {0.5f, -0.5f, 1.0f, -0.1f};
  r.dones = {0, 0, 0, 1};
  return r;
}

std::vector<float> LogProbs(ActorCritic& policy, const Rollout& r) {
  std::vector<float> logp, values;
  EXPECT_TRUE(EvaluatePolicy(policy, r.obs, r.actions.data(), &logp, &values).ok());
  return logp;
}

TEST(PpoStreamingTest, StreamingUsesTheConfiguredProximalPolicy) {
  const double lag = 0.5;  // log π − log π_b of every step
  for (bool behaviour : {false, true}) {
    auto policy = std::move(*ActorCritic::Create(Tiny(), 5, -0.5f));
    PpoConfig config;
    config.proximal_behaviour = behaviour;
    LocalCommunicator comm;
    PpoLearner learner(policy.get(), config, &comm, 1);
    Rollout r = StaleRollout(*policy, lag);
    const std::vector<float> b = r.behaviour_logp, start = LogProbs(*policy, r);
    PpoBatch learned;
    ASSERT_TRUE(learner.AccumulateStreaming(std::move(r), start, 0.25, 4, &learned).ok());
    ASSERT_EQ(learned.size(), 4);
    for (int i = 0; i < 4; ++i) {
      // behaviour: π_prox is π_b; current: the update's starting π, lag above it.
      EXPECT_NEAR(learned.proximal_logp[i], behaviour ? b[i] : b[i] + lag, 1e-4) << i;
    }
    auto stats = learner.StepAccumulated();
    ASSERT_TRUE(stats.ok());
    // The lag is measured against the starting policy either way: ρ = e^0.5 < the cap.
    EXPECT_NEAR(stats->behaviour_kl, std::expm1(lag) - lag, 1e-4);
    EXPECT_EQ(stats->importance_capped, 0.0);
  }
}

// One global batch streamed as one micro-batch takes the step that Update's one epoch of one
// minibatch takes on the batch the non-streaming learner builds from the same rollout: the same
// GAE (on the starting critic's values), V_old, π_prox, normalisation and loss. The behaviour
// policy lags, and the given values are not what the critic (value head at 0) gives now: a
// learner that used its own values, or another π_prox, would step elsewhere.
TEST(PpoStreamingTest, StreamedGlobalBatchTakesUpdatesStepOnTheSameData) {
  for (bool behaviour : {true, false}) {
    PpoConfig config;
    config.proximal_behaviour = behaviour;
    config.minibatches = 1;
    config.lr = 1e-2;
    config.entropy_coef = 0.01;
    auto streamed = std::move(*ActorCritic::Create(Tiny(), 5, -0.5f));
    auto reference = std::move(*ActorCritic::Create(Tiny(), 5, -0.5f));
    LocalCommunicator comm;
    PpoLearner streaming(streamed.get(), config, &comm, 1),
        updating(reference.get(), config, &comm, 1);
    Rollout r = StaleRollout(*streamed, 0.3);
    const std::vector<float> start = LogProbs(*streamed, r);

    PpoBatch batch;
    Rollout copy = r;
    AppendRollout(std::move(copy), config, &batch);
    if (!behaviour) batch.proximal_logp = start;
    auto want = updating.Update(batch, 1);
    ASSERT_TRUE(want.ok()) << want.status().ToString();

    PpoBatch learned;
    ASSERT_TRUE(streaming.AccumulateStreaming(std::move(r), start, 0.25, 4, &learned).ok());
    auto got = streaming.StepAccumulated();
    ASSERT_TRUE(got.ok()) << got.status().ToString();

    EXPECT_NEAR(got->policy_loss, want->policy_loss, 1e-6);
    EXPECT_NEAR(got->value_loss, want->value_loss, 1e-6);
    EXPECT_NEAR(got->grad_norm, want->grad_norm, 1e-5 * want->grad_norm);
    EXPECT_GT(want->grad_norm, 0.0);
    // The same gradient (as clipped for the step; Adam's first step is about ±lr on every
    // parameter whatever its gradient's size, so the gradients are what tells the two apart).
    double diff = 0, largest = 0;
    const auto compare = [&](const float* x, const float* y, size_t n) {
      for (size_t i = 0; i < n; ++i) {
        diff = std::max<double>(diff, std::abs(x[i] - y[i]));
        largest = std::max<double>(largest, std::abs(y[i]));
      }
    };
    compare(streamed->trunk().grads(), reference->trunk().grads(), reference->trunk().num_params());
    compare(streamed->head_grads().data(), reference->head_grads().data(),
            reference->head_grads().size());
    EXPECT_GT(largest, 1e-3);
    EXPECT_LT(diff, 1e-5 * largest) << "behaviour " << behaviour;
    auto fresh = std::move(*ActorCritic::Create(Tiny(), 5, -0.5f));
    double moved = 0;
    for (size_t i = 0; i < fresh->heads().size(); ++i) {
      moved = std::max<double>(moved, std::abs(streamed->heads()[i] - fresh->heads()[i]));
    }
    EXPECT_GT(moved, 1e-3);  // the step did move the policy
    // The batch for the later epochs is the non-streaming learner's.
    ASSERT_EQ(learned.size(), batch.size());
    for (int i = 0; i < batch.size(); ++i) {
      EXPECT_EQ(learned.proximal_logp[i], batch.proximal_logp[i]) << i;
      EXPECT_EQ(learned.values[i], batch.values[i]) << i;
      EXPECT_EQ(learned.returns[i], batch.returns[i]) << i;
    }
  }
}

TEST(PpoStreamingTest, AdvantageWindowKeepsTheMostRecentSteps) {
  LocalCommunicator comm;
  AdvantageWindow w;
  const float first[2] = {1, 2}, second[3] = {3, 4, 5};
  AdvantageWindow::Moments m = w.Add(first, 2, 4, &comm);
  EXPECT_NEAR(m.mean, 1.5, 1e-9);
  EXPECT_NEAR(m.sd, 0.5, 1e-7);
  m = w.Add(second, 3, 4, &comm);  // {2, 3, 4, 5}: the oldest goes
  EXPECT_EQ(w.size(), 4u);
  EXPECT_NEAR(m.mean, 3.5, 1e-9);
  EXPECT_NEAR(m.sd, std::sqrt(1.25), 1e-7);
  m = w.Add(second, 3, 2, &comm);  // a window below the micro-batch keeps the micro-batch
  EXPECT_EQ(w.size(), 3u);
  EXPECT_NEAR(m.mean, 4.0, 1e-9);
}

// A micro-batch is normalised with the steps streamed before it (up to the window), not alone:
// on fresh data (r = 1, w = 1, nothing clipped) the policy loss is −mean Â, which is 0 when a
// micro-batch is normalised over itself and −(mean_X − μ)/σ over the window.
TEST(PpoStreamingTest, MicroBatchIsNormalisedOverTheWindow) {
  PpoConfig config;
  config.proximal_behaviour = true;
  auto policy = std::move(*ActorCritic::Create(Tiny(), 5, -0.5f));
  LocalCommunicator comm;
  PpoLearner learner(policy.get(), config, &comm, 1);
  Rollout earlier = StaleRollout(*policy, 0.0, 3);
  Rollout now = StaleRollout(*policy, 0.0, 11);
  now.rewards = {2.0f, 1.5f, 1.0f, 0.5f};  // better than the earlier micro-batch
  std::vector<float> adv(8), ret(8);
  ComputeGae(earlier.rewards.data(), earlier.values.data(), earlier.dones.data(),
             earlier.last_values.data(), 2, 2, config.gamma, config.gae_lambda, adv.data(),
             ret.data());
  ComputeGae(now.rewards.data(), now.values.data(), now.dones.data(), now.last_values.data(), 2, 2,
             config.gamma, config.gae_lambda, adv.data() + 4, ret.data() + 4);
  double mu = 0, sq = 0, mean_now = 0;
  for (float a : adv) mu += a / 8.0;
  for (float a : adv) sq += (a - mu) * (a - mu) / 8.0;
  for (int i = 4; i < 8; ++i) mean_now += adv[i] / 4.0;

  PpoBatch learned;
  const std::vector<float> start_earlier = LogProbs(*policy, earlier);
  ASSERT_TRUE(
      learner.AccumulateStreaming(std::move(earlier), start_earlier, 0.25, 8, &learned).ok());
  auto alone = learner.StepAccumulated();  // the first micro-batch of a run has only itself
  ASSERT_TRUE(alone.ok());
  EXPECT_NEAR(alone->policy_loss, 0.0, 1e-6);
  // Acted by the policy now: r = 1.
  Rollout fresh = StaleRollout(*policy, 0.0, 11);
  fresh.rewards = now.rewards;
  const std::vector<float> start_now = LogProbs(*policy, fresh);
  ASSERT_TRUE(learner.AccumulateStreaming(std::move(fresh), start_now, 0.25, 8, &learned).ok());
  auto pooled = learner.StepAccumulated();
  ASSERT_TRUE(pooled.ok());
  EXPECT_NEAR(pooled->policy_loss, -(mean_now - mu) / (std::sqrt(sq) + 1e-8), 1e-5);
  EXPECT_LT(pooled->policy_loss, -0.1);
}

}  // namespace
}  // namespace engine::rl
