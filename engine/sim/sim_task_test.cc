// The tasks: determinism per seed, the scripted experts' success rates, rewards and resets.
#include "engine/sim/sim_task.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

namespace engine::sim {
namespace {

constexpr TaskKind kAll[] = {TaskKind::kReach, TaskKind::kPush, TaskKind::kPickPlace};

// Runs the expert on `n` environments at once, env e on episode seed base + e, to the end of
// every episode; returns how many succeeded, and each env's trajectory of effector and block
// coordinates (bit patterns) in *trace.
int RunExpert(TaskKind kind, int n, uint64_t base, std::vector<double>* trace = nullptr) {
  SimTasks tasks(kind, n);
  for (int e = 0; e < n; ++e) tasks.Reset(e, base + e);
  std::vector<float> actions(static_cast<size_t>(n) * kActionDim);
  std::vector<double> rewards(n);
  std::vector<uint8_t> done(n, 0);
  std::vector<uint8_t> succeeded(n, 0);
  for (int t = 0; t < tasks.max_steps(); ++t) {
    for (int e = 0; e < n; ++e)
      tasks.ExpertAction(e, &actions[static_cast<size_t>(e) * kActionDim]);
    tasks.Step(actions, rewards, done);
    for (int e = 0; e < n; ++e) {
      if (tasks.Success(e)) succeeded[e] = 1;
      if (trace != nullptr) {
        for (int a = 0; a < 3; ++a) trace->push_back(tasks.world().ee(e, a));
        if (kind != TaskKind::kReach) {
          for (int a = 0; a < 3; ++a) trace->push_back(tasks.world().block(e, 0, a));
        }
        trace->push_back(rewards[e]);
      }
    }
  }
  int wins = 0;
  for (int e = 0; e < n; ++e) {
    EXPECT_TRUE(done[e]) << TaskName(kind) << " env " << e;
    wins += succeeded[e];
  }
  return wins;
}

TEST(SimTaskTest, ExpertSucceedsOnAtLeast95PercentOfEpisodes) {
  for (TaskKind kind : kAll) {
    const int episodes = 200;
    const int wins = RunExpert(kind, episodes, 1000);
    EXPECT_GE(wins, 190) << TaskName(kind) << ": " << wins << " of " << episodes;
    std::printf("expert %s: %d of %d episodes succeeded\n", TaskName(kind), wins, episodes);
  }
}

TEST(SimTaskTest, TheExpertIsAFunctionOfTheStateAlone) {
  // Asking the expert again, any number of times, returns the same action and changes nothing
  // about the episode: it keeps no phase, so a policy seeing the state can clone it.
  for (TaskKind kind : {TaskKind::kPush, TaskKind::kPickPlace}) {
    SimTasks once(kind, 1), thrice(kind, 1);
    once.Reset(0, 77);
    thrice.Reset(0, 77);
    bool done_once = false, done_thrice = false;
    int steps = 0;
    while (!done_once) {
      float a[kActionDim], b[kActionDim], c[kActionDim];
      once.ExpertAction(0, a);
      thrice.ExpertAction(0, b);
      thrice.ExpertAction(0, c);
      ASSERT_EQ(std::memcmp(b, c, sizeof(b)), 0) << TaskName(kind) << " step " << steps;
      thrice.ExpertAction(0, c);
      ASSERT_EQ(std::memcmp(a, c, sizeof(a)), 0) << TaskName(kind) << " step " << steps;
      once.StepEnv(0, a, &done_once);
      thrice.StepEnv(0, c, &done_thrice);
      ++steps;
    }
    EXPECT_TRUE(done_thrice);
    EXPECT_TRUE(once.Success(0)) << TaskName(kind);
  }
}

TEST(SimTaskTest, SameSeedGivesBitIdenticalTrajectories) {
  for (TaskKind kind : kAll) {
    std::vector<double> a, b, c;
    RunExpert(kind, 8, 42, &a);
    RunExpert(kind, 8, 42, &b);
    RunExpert(kind, 8, 43, &c);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(double)), 0) << TaskName(kind);
    EXPECT_NE(a, c) << TaskName(kind);
  }
}

TEST(SimTaskTest, AnEpisodeDependsOnItsSeedNotItsSlot) {
  SimTasks tasks(TaskKind::kPush, 3);
  tasks.Reset(0, 7);
  tasks.Reset(2, 7);
  tasks.Reset(1, 8);
  for (int a = 0; a < 3; ++a) {
    EXPECT_EQ(tasks.world().ee(0, a), tasks.world().ee(2, a));
    EXPECT_EQ(tasks.goal(0, a), tasks.goal(2, a));
    EXPECT_EQ(tasks.world().block(0, 0, a), tasks.world().block(2, 0, a));
  }
  EXPECT_NE(tasks.goal(0, 0), tasks.goal(1, 0));
}

TEST(SimTaskTest, ResetNeverStartsSolvedOrInContact) {
  for (TaskKind kind : kAll) {
    SimTasks tasks(kind, 1);
    for (uint64_t seed = 0; seed < 300; ++seed) {
      tasks.Reset(0, seed);
      EXPECT_FALSE(tasks.Success(0)) << TaskName(kind) << " seed " << seed;
      EXPECT_EQ(tasks.world().held(0), -1);
    }
  }
}

TEST(SimTaskTest, SuccessEndsTheEpisodeWithTheBonusAndIdleStepsDoNot) {
  SimTasks tasks(TaskKind::kReach, 1);
  tasks.Reset(0, 5);
  double last = 0.0;
  bool done = false;
  int steps = 0;
  while (!done) {
    float a[kActionDim];
    tasks.ExpertAction(0, a);
    last = tasks.StepEnv(0, a, &done);
    ++steps;
  }
  ASSERT_TRUE(tasks.Success(0));
  EXPECT_LT(steps, tasks.max_steps());
  EXPECT_GT(last, kSuccessBonus - kReachTolerance);  // −distance + bonus
  const float still[kActionDim] = {0, 0, 0, -1};
  EXPECT_EQ(tasks.StepEnv(0, still, &done), 0.0);  // finished: not stepped
  EXPECT_TRUE(done);

  // Doing nothing runs to max_steps without success, each reward the negative distance.
  tasks.Reset(0, 5);
  done = false;
  steps = 0;
  while (!done) {
    const double r = tasks.StepEnv(0, still, &done);
    EXPECT_LT(r, 0.0);
    ++steps;
  }
  EXPECT_EQ(steps, tasks.max_steps());
  EXPECT_FALSE(tasks.Success(0));
}

TEST(SimTaskTest, PickPlaceNeedsTheBlockPickedAndPutDown) {
  SimTasks tasks(TaskKind::kPickPlace, 1);
  tasks.Reset(0, 11);
  TableWorld& w = tasks.mutable_world();
  // On the goal without having been lifted (pushed there, or grasped and let go in place): not
  // a success. Push counts the same position.
  w.SetEffector(0, tasks.goal(0, 0), tasks.goal(0, 1), kBlockHalf);
  w.SetBlock(0, 0, tasks.goal(0, 0), tasks.goal(0, 1), kBlockHalf);
  const float close[kActionDim] = {0, 0, 0, 1}, open[kActionDim] = {0, 0, 0, -1};
  const float up[kActionDim] = {0, 0, 1, 1}, down[kActionDim] = {0, 0, -1, 1};
  bool done = false;
  tasks.StepEnv(0, close, &done);
  ASSERT_EQ(w.held(0), 0);
  EXPECT_FALSE(tasks.Success(0)) << "held";
  tasks.StepEnv(0, open, &done);
  EXPECT_FALSE(tasks.Success(0)) << "released where it lay: never picked";
  EXPECT_FALSE(done);
  // Grasped, lifted past kLiftClearance, put down on the goal, released: success.
  tasks.StepEnv(0, close, &done);
  ASSERT_EQ(w.held(0), 0);
  for (int i = 0; i < 40 && w.block(0, 0, 2) - kBlockHalf <= kLiftClearance + 0.005; ++i) {
    tasks.StepEnv(0, up, &done);
  }
  ASSERT_GT(w.block(0, 0, 2) - kBlockHalf, kLiftClearance);
  for (int i = 0; i < 60 && w.block(0, 0, 2) - kBlockHalf > 1e-6; ++i) tasks.StepEnv(0, down, &done);
  EXPECT_FALSE(tasks.Success(0)) << "still held";
  const double r = tasks.StepEnv(0, open, &done);
  EXPECT_TRUE(tasks.Success(0));
  EXPECT_TRUE(done);
  EXPECT_GT(r, kSuccessBonus - 1.0);

  SimTasks push(TaskKind::kPush, 1);
  push.Reset(0, 11);
  push.mutable_world().SetBlock(0, 0, push.goal(0, 0), push.goal(0, 1), kBlockHalf);
  push.StepEnv(0, open, &done);
  EXPECT_TRUE(push.Success(0));
}

TEST(SimTaskTest, ParsesTaskNames) {
  for (TaskKind kind : kAll) EXPECT_EQ(ParseTaskKind(TaskName(kind)).value(), kind);
  EXPECT_FALSE(ParseTaskKind("stack").ok());
}

}  // namespace
}  // namespace engine::sim

namespace engine::sim {
namespace {

TEST(SimTaskTest, LatencyIsKeyedByEnvAndStepAndAVectorisedStepWaitsForTheSlowest) {
  auto latency = StepLatency::Create({.mean_s = 0.002, .jitter = 0.5, .seed = 9}).value();
  SimTasks tasks(TaskKind::kReach, 4);
  tasks.SetLatency(latency, StepLatency::WaitMode::kBusy);
  for (int e = 0; e < 4; ++e) tasks.Reset(e, e);
  std::vector<float> actions(4 * kActionDim, 0.0f);
  std::vector<double> rewards(4);
  std::vector<uint8_t> done(4);
  for (uint64_t step = 0; step < 3; ++step) {
    const auto start = std::chrono::steady_clock::now();
    tasks.Step(actions, rewards, done);
    const double spent =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double slowest = 0.0;
    for (int e = 0; e < 4; ++e) {
      EXPECT_EQ(tasks.last_latency(e), latency.Sample(e, step));
      slowest = std::max(slowest, tasks.last_latency(e));
    }
    EXPECT_GE(spent, slowest);
  }
  // Without a model, no time is given.
  SimTasks plain(TaskKind::kReach, 1);
  plain.Reset(0, 1);
  bool d = false;
  plain.StepEnv(0, actions.data(), &d);
  EXPECT_EQ(plain.last_latency(0), 0.0);
}

}  // namespace
}  // namespace engine::sim
