#include "engine/sim/reach_env.h"

#include <cmath>

#include <gtest/gtest.h>

namespace engine::sim {
namespace {

ReachEnvConfig SmallConfig() {
  ReachEnvConfig c;
  c.num_envs = 8;
  c.action_dim = 7;
  c.cameras = 2;
  c.episode_steps = 40;
  return c;
}

TEST(ReachEnvTest, ObservationsAreInThePolicyModalities) {
  auto env = ReachVecEnv::Create(SmallConfig());
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  const auto& obs = (*env)->observations();
  ASSERT_EQ(obs.size(), 8u);
  for (const PolicySample& s : obs) {
    EXPECT_EQ(s.language.size(), 14u);
    for (int32_t id : s.language) EXPECT_LT(id, 256);
    EXPECT_EQ(s.frames, 1);
    EXPECT_EQ(s.cameras, 2);
    EXPECT_EQ(s.patches.size(), static_cast<size_t>(2 * 16 * kPatchDim));
    EXPECT_EQ(s.states.size(), static_cast<size_t>(kStateDim));
    EXPECT_TRUE(s.actions.empty());
  }
}

TEST(ReachEnvTest, TheExpertSucceedsAndRewardsAreDistanceDecrease) {
  auto env = std::move(*ReachVecEnv::Create(SmallConfig()));
  env->Reset(7);
  StepResult step;
  std::vector<int> ended(8, 0), won(8, 0);
  for (int t = 0; t < 40; ++t) {
    std::vector<double> before(8);
    for (int e = 0; e < 8; ++e) before[e] = env->Distance(e);
    ASSERT_TRUE(env->Step(env->ExpertActions(), &step).ok());
    for (int e = 0; e < 8; ++e) {
      if (!step.done[e]) {
        EXPECT_NEAR(step.reward[e], before[e] - env->Distance(e), 1e-5);
      } else if (ended[e] == 0) {
        ended[e] = 1;
        won[e] = step.success[e];
        EXPECT_EQ(step.success[e], 1) << "env " << e;
        EXPECT_GT(step.reward[e], 0.9f);  // success bonus 1 plus the last approach
        EXPECT_GT(step.episode_length[e], 0);
      }
    }
  }
  for (int e = 0; e < 8; ++e) EXPECT_EQ(won[e], 1) << "env " << e;
}

TEST(ReachEnvTest, SameSeedSameEpisodesAndActionsAreClipped) {
  auto a = std::move(*ReachVecEnv::Create(SmallConfig()));
  auto b = std::move(*ReachVecEnv::Create(SmallConfig()));
  a->Reset(3);
  b->Reset(3);
  std::vector<float> act(8 * 7, 5.0f);  // clipped to 1: one full step per coordinate
  StepResult sa, sb;
  ASSERT_TRUE(a->Step(act, &sa).ok());
  ASSERT_TRUE(b->Step(act, &sb).ok());
  EXPECT_EQ(sa.reward, sb.reward);
  EXPECT_EQ(a->observations()[0].states, b->observations()[0].states);
  EXPECT_EQ(a->observations()[3].patches, b->observations()[3].patches);
  b->Reset(4);
  EXPECT_NE(a->observations()[0].states, b->observations()[0].states);
  // Wrong size and non-finite actions are refused.
  EXPECT_FALSE(a->Step(std::vector<float>(3, 0.0f), &sa).ok());
  act[5] = std::nanf("");
  EXPECT_FALSE(a->Step(act, &sa).ok());
}

TEST(ReachEnvTest, EpisodesEndAtTheStepLimit) {
  ReachEnvConfig c = SmallConfig();
  c.episode_steps = 3;
  c.cameras = 0;
  auto env = std::move(*ReachVecEnv::Create(c));
  StepResult step;
  const std::vector<float> still(8 * 7, 0.0f);
  for (int t = 0; t < 3; ++t) ASSERT_TRUE(env->Step(still, &step).ok());
  for (int e = 0; e < 8; ++e) {  // zero actions never move the end effector
    EXPECT_EQ(step.done[e], 1);
    EXPECT_EQ(step.success[e], 0);
    EXPECT_EQ(step.episode_length[e], 3);
  }
}

TEST(ReachEnvTest, BadConfigsAreRefused) {
  ReachEnvConfig c = SmallConfig();
  c.cameras = 4;
  EXPECT_FALSE(ReachVecEnv::Create(c).ok());
  c = SmallConfig();
  c.num_envs = 0;
  EXPECT_FALSE(ReachVecEnv::Create(c).ok());
}

}  // namespace
}  // namespace engine::sim
