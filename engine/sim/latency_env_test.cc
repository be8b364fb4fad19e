#include "engine/sim/latency_env.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include <gtest/gtest.h>

#include "engine/sim/make_env.h"

namespace engine::sim {
namespace {

api::RlLatencyOptions Latency() {
  api::RlLatencyOptions l;
  l.mean_ms = 1.0;
  l.jitter = 0.5;
  l.tail_probability = 0.2;
  l.tail_scale = 3.0;
  return l;
}

std::unique_ptr<VecEnv> Reach(int n) {
  EnvSpec spec;
  spec.num_envs = n;
  spec.action_dim = 3;
  spec.cameras = 0;
  auto env = MakeVecEnv(spec);
  EXPECT_TRUE(env.ok());
  return std::move(env).value();
}

TEST(LatencyEnvTest, AStepWaitsTheSlowestEnvironmentsDrawAndEachEnvironmentKeepsItsSchedule) {
  const int N = 4, steps = 5;
  auto together = WithLatency(Reach(N), Latency(), 7, /*first_env=*/10);
  ASSERT_TRUE(together.ok());
  std::vector<std::unique_ptr<VecEnv>> alone;
  for (int e = 0; e < N; ++e) {
    auto one = WithLatency(Reach(1), Latency(), 7, 10 + e);
    ASSERT_TRUE(one.ok());
    alone.push_back(std::move(one).value());
  }
  StepResult r;
  const std::vector<float> actions(N * 3, 0.0f), action(3, 0.0f);
  double expected = 0.0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int k = 0; k < steps; ++k) {
    std::vector<double> before(N);
    for (int e = 0; e < N; ++e) {
      before[e] = static_cast<LatencyVecEnv&>(*alone[e]).waited_seconds();
      ASSERT_TRUE(alone[e]->Step(action, &r).ok());
    }
    double longest = 0.0;
    for (int e = 0; e < N; ++e) {
      longest =
          std::max(longest, static_cast<LatencyVecEnv&>(*alone[e]).waited_seconds() - before[e]);
    }
    expected += longest;
    ASSERT_TRUE((*together)->Step(actions, &r).ok());
  }
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double waited = static_cast<LatencyVecEnv&>(**together).waited_seconds();
  EXPECT_DOUBLE_EQ(waited, expected);
  EXPECT_GT(waited, 0.0);
  EXPECT_GE(elapsed, waited);  // it did wait (the lone environments' waits come on top)
}

TEST(LatencyEnvTest, NoLatencyLeavesTheEnvironmentUnwrappedAndBadOptionsNameTheField) {
  VecEnv* raw = nullptr;
  auto env = Reach(2);
  raw = env.get();
  auto same = WithLatency(std::move(env), api::RlLatencyOptions{}, 1, 0);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->get(), raw);

  api::RlLatencyOptions bad = Latency();
  bad.tail_alpha = 0.5;
  auto refused = WithLatency(Reach(2), bad, 1, 0);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().field(), "engine.rl.env_latency.tail_alpha");
}

}  // namespace
}  // namespace engine::sim
