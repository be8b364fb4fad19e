#include "engine/rl/ppo.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "engine/dist/communicator.h"
#include "engine/rl/gaussian.h"

namespace engine::rl {
namespace {

TEST(GaeTest, MatchesAHandComputedCase) {
  // One environment, 3 steps, γ = 0.9, λ = 0.5, the episode ends after step 1 (index 1).
  //   δ2 = 1 + 0.9·4 − 3 = 1.6          Â2 = 1.6                        (bootstraps from V=4)
  //   δ1 = 2 + 0 − 2 = 0                 Â1 = 0                          (done: no bootstrap)
  //   δ0 = 0.5 + 0.9·2 − 1 = 1.3         Â0 = 1.3 + 0.45·0 = 1.3
  const float rewards[3] = {0.5f, 2.0f, 1.0f};
  const float values[3] = {1.0f, 2.0f, 3.0f};
  const uint8_t dones[3] = {0, 1, 0};
  const float last = 4.0f;
  float adv[3], ret[3];
  ComputeGae(rewards, values, dones, &last, 3, 1, 0.9, 0.5, adv, ret);
  EXPECT_NEAR(adv[2], 1.6, 1e-6);
  EXPECT_NEAR(adv[1], 0.0, 1e-6);
  EXPECT_NEAR(adv[0], 1.3, 1e-6);
  for (int t = 0; t < 3; ++t) EXPECT_NEAR(ret[t], adv[t] + values[t], 1e-6);

  // No episode end: Â0 = δ0 + γλ δ1 with δ1 = 2 + 0.9·3 − 2 = 2.7, δ0 = 1.3 → 1.3 + 0.45·(2.7 +
  // 0.45·1.6) = 2.839.
  const uint8_t none[3] = {0, 0, 0};
  ComputeGae(rewards, values, none, &last, 3, 1, 0.9, 0.5, adv, ret);
  EXPECT_NEAR(adv[1], 2.7 + 0.45 * 1.6, 1e-6);
  EXPECT_NEAR(adv[0], 1.3 + 0.45 * (2.7 + 0.45 * 1.6), 1e-5);
}

TEST(GaeTest, EnvironmentsAreIndependentColumns) {
  // (T=2, N=2), row t·N + e: environment 1's numbers must not leak into environment 0's.
  const float rewards[4] = {1, 10, 1, 10};
  const float values[4] = {0, 0, 0, 0};
  const uint8_t dones[4] = {0, 0, 0, 0};
  const float last[2] = {0, 0};
  float adv[4], ret[4];
  ComputeGae(rewards, values, dones, last, 2, 2, 1.0, 1.0, adv, ret);
  EXPECT_NEAR(adv[0], 2.0, 1e-6);
  EXPECT_NEAR(adv[1], 20.0, 1e-6);
}

TEST(ClippedSurrogateTest, GradientIsZeroOutsideTheClipRange) {
  const double clip = 0.2, cap = 2.0;
  double d = 0;
  bool clipped = false;
  // Positive advantage: clipped (flat) once r > 1 + ε; live below.
  ClippedSurrogate(std::log(1.3), 0.0, 0.0, 1.0, clip, cap, &d, &clipped);
  EXPECT_TRUE(clipped);
  EXPECT_EQ(d, 0.0);
  ClippedSurrogate(std::log(0.7), 0.0, 0.0, 1.0, clip, cap, &d, &clipped);
  EXPECT_FALSE(clipped);
  EXPECT_NEAR(d, -0.7, 1e-12);  // d(−r Â)/d log π = −r Â
  // Negative advantage: flat once r < 1 − ε; live above.
  ClippedSurrogate(std::log(0.7), 0.0, 0.0, -1.0, clip, cap, &d, &clipped);
  EXPECT_TRUE(clipped);
  EXPECT_EQ(d, 0.0);
  ClippedSurrogate(std::log(1.3), 0.0, 0.0, -1.0, clip, cap, &d, &clipped);
  EXPECT_FALSE(clipped);
  EXPECT_NEAR(d, 1.3, 1e-12);
  // Inside the range both branches agree and the gradient is live.
  const double loss = ClippedSurrogate(std::log(1.1), 0.0, 0.0, 2.0, clip, cap, &d, &clipped);
  EXPECT_FALSE(clipped);
  EXPECT_NEAR(loss, -2.2, 1e-12);
  EXPECT_NEAR(d, -2.2, 1e-12);
}

TEST(ClippedSurrogateTest, GradientMatchesFiniteDifferencesInside) {
  double d = 0;
  bool clipped = false;
  const double lp = std::log(1.05), h = 1e-6;
  ClippedSurrogate(lp, 0.1, 0.1, 0.7, 0.2, 2.0, &d, &clipped);
  double dd;
  const double up = ClippedSurrogate(lp + h, 0.1, 0.1, 0.7, 0.2, 2.0, &dd, &clipped);
  const double down = ClippedSurrogate(lp - h, 0.1, 0.1, 0.7, 0.2, 2.0, &dd, &clipped);
  EXPECT_NEAR(d, (up - down) / (2 * h), 1e-6);
}

TEST(ClippedSurrogateTest, StaleBehaviourIsReweightedByTheCappedImportanceWeight) {
  // A synthetic stale step: the behaviour policy gave the action log-prob −2, the proximal
  // (newer) policy −1.5, so π_prox/π_b = e^0.5 ≈ 1.65 (under the cap) weights the step.
  double d = 0, d_sync = 0;
  bool clipped = false;
  const double lp = -1.5 + std::log(1.1);  // r = 1.1 relative to the proximal policy
  const double stale = ClippedSurrogate(lp, -1.5, -2.0, 1.0, 0.2, 2.0, &d, &clipped);
  const double sync = ClippedSurrogate(lp, -1.5, -1.5, 1.0, 0.2, 2.0, &d_sync, &clipped);
  EXPECT_NEAR(stale, std::exp(0.5) * sync, 1e-9);
  EXPECT_NEAR(d, std::exp(0.5) * d_sync, 1e-9);
  // Very stale (π_prox/π_b = e^3 ≈ 20): the weight is capped at 2.
  const double capped = ClippedSurrogate(lp, -1.5, -4.5, 1.0, 0.2, 2.0, &d, &clipped);
  EXPECT_NEAR(capped, 2.0 * sync, 1e-9);
  EXPECT_NEAR(d, 2.0 * d_sync, 1e-9);
  // The clip is relative to the proximal policy, not the behaviour one: r = 1.1 is inside.
  EXPECT_FALSE(clipped);
}

TEST(ClippedSurrogateTest, BehaviourProximalClipsAroundTheActingPolicy) {
  // The same stale step as above (π_b(a) = e^−2, the learner's π(a) = e^−1.5), with level 1's
  // two choices of π_prox:
  //   behaviour  r = π/π_b = e^0.5 ≈ 1.65, w = 1: past 1 + ε for Â = 1, so the step is clipped:
  //              loss −(1 + ε)·Â = −1.2, no gradient; for Â = −1 the unclipped branch is the min:
  //              loss +1.65, gradient +1.65.
  //   current    r = 1, w = min(e^0.5, 2): loss −1.65·Â, gradient −1.65·Â, never clipped.
  const double lp = -1.5, b = -2.0, clip = 0.2, cap = 2.0, rho = std::exp(0.5);
  double d = 0;
  bool clipped = false;
  EXPECT_NEAR(ClippedSurrogate(lp, b, b, 1.0, clip, cap, &d, &clipped), -1.2, 1e-12);
  EXPECT_TRUE(clipped);
  EXPECT_EQ(d, 0.0);
  EXPECT_NEAR(ClippedSurrogate(lp, b, b, -1.0, clip, cap, &d, &clipped), rho, 1e-12);
  EXPECT_FALSE(clipped);
  EXPECT_NEAR(d, rho, 1e-12);
  EXPECT_NEAR(ClippedSurrogate(lp, lp, b, 1.0, clip, cap, &d, &clipped), -rho, 1e-12);
  EXPECT_FALSE(clipped);
  EXPECT_NEAR(d, -rho, 1e-12);
}

TEST(BehaviourStatsTest, MatchesAHandComputedCase) {
  // ρ = π_prox/π_b of 1 and 3, cap 2: KL estimate mean((ρ − 1) − log ρ) = (2 − log 3)/2, one
  // step of two over the cap, mean capped weight (1 + 2)/2.
  const float prox[2] = {-1.0f, static_cast<float>(std::log(3.0) - 1.0)};
  const float behaviour[2] = {-1.0f, -1.0f};
  LocalCommunicator comm;
  PpoStats s;
  BehaviourStats(prox, behaviour, 2, 2.0, &comm, &s);
  EXPECT_NEAR(s.behaviour_kl, (2.0 - std::log(3.0)) / 2, 1e-6);
  EXPECT_DOUBLE_EQ(s.importance_capped, 0.5);
  EXPECT_NEAR(s.importance_weight, 1.5, 1e-6);
  BehaviourStats(behaviour, behaviour, 2, 2.0, &comm, &s);  // on-policy: no lag
  EXPECT_EQ(s.behaviour_kl, 0.0);
  EXPECT_EQ(s.importance_capped, 0.0);
  EXPECT_EQ(s.importance_weight, 1.0);
}

TEST(ValueLossTest, ClippedAndPlain) {
  double d = 0;
  // Plain: ½ (V − R)².
  EXPECT_NEAR(ValueLoss(1.0, 0.0, 3.0, 0.2, false, &d), 2.0, 1e-12);
  EXPECT_NEAR(d, -2.0, 1e-12);
  // Clipped: V = 1 moved from V_old = 0 past ε = 0.2 toward R = 3. The clipped value 0.2 is
  // farther from R, so its term is the max, and it is flat in V (V is outside V_old ± ε).
  EXPECT_NEAR(ValueLoss(1.0, 0.0, 3.0, 0.2, true, &d), 0.5 * 2.8 * 2.8, 1e-12);
  EXPECT_EQ(d, 0.0);
  // Moving away from the target past the clip: the plain term is larger and keeps its gradient.
  EXPECT_NEAR(ValueLoss(-1.0, 0.0, 3.0, 0.2, true, &d), 8.0, 1e-12);
  EXPECT_NEAR(d, -4.0, 1e-12);
}

}  // namespace
}  // namespace engine::rl
