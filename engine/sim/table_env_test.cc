#include "engine/sim/table_env.h"

#include <cmath>

#include <gtest/gtest.h>

#include "engine/sim/make_env.h"

namespace engine::sim {
namespace {

TableEnvConfig Config(sim::TaskKind task, int action_dim = 4) {
  TableEnvConfig c;
  c.task = task;
  c.num_envs = 8;
  c.action_dim = action_dim;
  c.cameras = 2;
  return c;
}

// Steps every environment with the expert until each one's first episode ended; returns the
// successes and checks each episode's return is the sum of its rewards.
int ExpertSuccesses(TableVecEnv& env) {
  StepResult step;
  std::vector<int> ended(env.num_envs(), 0);
  std::vector<double> sum(env.num_envs(), 0.0);
  int successes = 0, open = env.num_envs();
  for (int t = 0; open > 0 && t < 1000; ++t) {
    const std::vector<float> a = env.ExpertActions();
    EXPECT_TRUE(env.Step(a, &step).ok());
    for (int e = 0; e < env.num_envs(); ++e) {
      if (ended[e]) continue;
      sum[e] += step.reward[e];
      if (!step.done[e]) continue;
      ended[e] = 1;
      --open;
      successes += step.success[e];
      EXPECT_NEAR(step.episode_return[e], sum[e], 1e-4);
      EXPECT_LE(step.episode_length[e], env.episode_steps());
    }
  }
  EXPECT_EQ(open, 0);
  return successes;
}

TEST(TableEnvTest, ObservationsAreThoseOfTheDemonstrations) {
  auto env = TableVecEnv::Create(Config(sim::TaskKind::kPush));
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  for (const PolicySample& s : (*env)->observations()) {
    ASSERT_EQ(s.language.size(), 8u);
    EXPECT_GT(s.language[0], 0);  // "push"
    EXPECT_EQ(s.language[7], 0);  // <pad>
    EXPECT_EQ(s.cameras, 2);
    EXPECT_EQ(s.patches.size(), static_cast<size_t>(2 * 16 * kPatchDim));
    ASSERT_EQ(s.states.size(), static_cast<size_t>(kStateDim));
    for (int k = 4; k < kStateDim; ++k) EXPECT_EQ(s.states[k], 0.0f);  // no privileged entries
    EXPECT_TRUE(s.actions.empty());
  }
  TableEnvConfig privileged = Config(sim::TaskKind::kPush);
  privileged.privileged_state = true;
  auto env2 = std::move(*TableVecEnv::Create(privileged));
  EXPECT_NE(env2->observations()[0].states[4], 0.0f);  // the block's x
}

TEST(TableEnvTest, TheExpertSolvesPushAndPickPlaceInBothActionLayouts) {
  for (sim::TaskKind task : {sim::TaskKind::kPush, sim::TaskKind::kPickPlace}) {
    for (int action_dim : {4, 7}) {
      auto env = std::move(*TableVecEnv::Create(Config(task, action_dim)));
      env->Reset(11);
      EXPECT_GE(ExpertSuccesses(*env), 7) << sim::TaskName(task) << " action_dim " << action_dim;
    }
  }
}

TEST(TableEnvTest, DoingNothingFailsAndEarnsNothing) {
  auto env = std::move(*TableVecEnv::Create(Config(sim::TaskKind::kPush)));
  env->Reset(3);
  StepResult step;
  const std::vector<float> zero(8 * 4, 0.0f);
  int done = 0;
  for (int t = 0; t < env->episode_steps(); ++t) {
    ASSERT_TRUE(env->Step(zero, &step).ok());
    for (int e = 0; e < 8; ++e) {
      EXPECT_NEAR(step.reward[e], 0.0f, 1e-6);  // nothing moves: no progress either way
      done += step.done[e];
      EXPECT_EQ(step.success[e], 0);
    }
  }
  EXPECT_EQ(done, 8);  // every episode cut at the step limit
}

TEST(TableEnvTest, SameSeedSameEpisodesAndBadActionsAreRefused) {
  auto a = std::move(*TableVecEnv::Create(Config(sim::TaskKind::kPickPlace)));
  auto b = std::move(*TableVecEnv::Create(Config(sim::TaskKind::kPickPlace)));
  a->Reset(5);
  b->Reset(5);
  StepResult sa, sb;
  for (int t = 0; t < 30; ++t) {
    std::vector<float> act(8 * 4);
    for (size_t i = 0; i < act.size(); ++i) act[i] = std::sin(0.7 * t + 1.3 * i);
    ASSERT_TRUE(a->Step(act, &sa).ok());
    ASSERT_TRUE(b->Step(act, &sb).ok());
    EXPECT_EQ(sa.reward, sb.reward);
    EXPECT_EQ(a->observations()[3].patches, b->observations()[3].patches);
  }
  b->Reset(6);
  EXPECT_NE(a->observations()[0].language, b->observations()[0].language);
  std::vector<float> bad(8 * 4, 0.0f);
  bad[5] = std::nanf("");
  EXPECT_FALSE(a->Step(bad, &sa).ok());
  EXPECT_FALSE(a->Step(std::vector<float>(3), &sa).ok());
}

TEST(TableEnvTest, MakeVecEnvKnowsTheThreeTasks) {
  for (const char* task : kEnvTasks) {
    EnvSpec s;
    s.task = task;
    s.num_envs = 2;
    s.action_dim = 7;
    auto env = MakeVecEnv(s);
    ASSERT_TRUE(env.ok()) << task << ": " << env.status().ToString();
    EXPECT_EQ((*env)->num_envs(), 2);
  }
  EnvSpec s;
  s.task = "stack";
  EXPECT_FALSE(MakeVecEnv(s).ok());
  s.task = "push";
  s.action_dim = 5;  // neither (dx, dy, dz, grip) nor robomimic's layout
  EXPECT_FALSE(MakeVecEnv(s).ok());
}

}  // namespace
}  // namespace engine::sim
