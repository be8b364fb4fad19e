#include "engine/sim/reach_task.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

namespace engine {
namespace {

struct Batch {
  std::vector<float> obs, chunks;
};

Batch Draw(const ReachTask& task, uint64_t rank, uint64_t step, int n) {
  Batch b{std::vector<float>(n * task.obs_dim()), std::vector<float>(n * task.chunk_dim())};
  task.Sample(rank, step, n, b.obs.data(), b.chunks.data());
  return b;
}

TEST(ReachTaskTest, DeterministicPerSeedRankAndStep) {
  ReachTask a(7, 16, 5), b(7, 16, 5), other_seed(7, 16, 6);
  Batch x = Draw(a, 0, 3, 8), y = Draw(b, 0, 3, 8);
  EXPECT_EQ(x.obs, y.obs);
  EXPECT_EQ(x.chunks, y.chunks);
  EXPECT_NE(x.obs, Draw(a, 1, 3, 8).obs);           // another rank
  EXPECT_NE(x.obs, Draw(a, 0, 4, 8).obs);           // another step
  EXPECT_NE(x.obs, Draw(other_seed, 0, 3, 8).obs);  // another seed
}

TEST(ReachTaskTest, SampleAtIsAFunctionOfSeedAndGlobalIndex) {
  ReachTask a(7, 16, 5), b(7, 16, 5), other_seed(7, 16, 6);
  auto at = [](const ReachTask& t, uint64_t i) {
    Batch s{std::vector<float>(t.obs_dim()), std::vector<float>(t.chunk_dim())};
    t.SampleAt(i, s.obs.data(), s.chunks.data());
    return s;
  };
  EXPECT_EQ(at(a, 123).obs, at(b, 123).obs);
  EXPECT_EQ(at(a, 123).chunks, at(b, 123).chunks);
  EXPECT_NE(at(a, 123).obs, at(a, 124).obs);
  EXPECT_NE(at(a, 123).obs, at(other_seed, 123).obs);
  // Its stream is not one of the per-rank streams.
  EXPECT_NE(at(a, 0).obs, Draw(a, 0, 0, 1).obs);
  // Same expert: the chunk starts with the action the controller takes from the observed state.
  Batch s = at(a, 7);
  double c[7], g[7], act[7];
  for (int j = 0; j < 7; ++j) c[j] = s.obs[j], g[j] = s.obs[7 + j];
  a.ExpertAction(c, g, act);
  for (int j = 0; j < 7; ++j) EXPECT_NEAR(s.chunks[j], act[j], 1e-6);
}

TEST(ReachTaskTest, ObservationLayout) {
  ReachTask task(7, 4, 1);
  EXPECT_EQ(task.obs_dim(), 2 * 7 + ReachTask::kDistractors);
  EXPECT_EQ(task.chunk_dim(), 4 * 7);
  Batch b = Draw(task, 0, 0, 64);
  for (int i = 0; i < 64; ++i) {
    const float* o = b.obs.data() + i * task.obs_dim();
    for (int j = 0; j < 3; ++j) {
      EXPECT_LE(std::fabs(o[j]), 0.5f);      // position in the workspace
      EXPECT_LE(std::fabs(o[7 + j]), 0.5f);  // target in the workspace
    }
    EXPECT_EQ(std::fabs(o[ReachTask::kGripper]), 1.0f);
    EXPECT_EQ(o[7 + ReachTask::kGripper], 1.0f);
  }
}

TEST(ReachTaskTest, ExpertActionsAreBoundedAndNotDegenerate) {
  ReachTask task(7, 16, 2);
  Batch b = Draw(task, 0, 0, 256);
  double sum_abs = 0.0;
  int saturated = 0, continuous = 0;
  for (size_t i = 0; i < b.chunks.size(); ++i) {
    float a = b.chunks[i];
    ASSERT_GE(a, -1.0f);
    ASSERT_LE(a, 1.0f);
    if (i % 7 == ReachTask::kGripper) continue;
    ++continuous;
    sum_abs += std::fabs(a);
    saturated += std::fabs(a) == 1.0f;
  }
  const double mean_abs = sum_abs / continuous;
  EXPECT_GT(mean_abs, 0.05);
  EXPECT_LT(mean_abs, 0.9);
  EXPECT_LT(saturated, continuous / 2);
}

// Following the expert's chunk brings the end effector to the target and closes the gripper there.
TEST(ReachTaskTest, ExpertChunkReachesAndGrasps) {
  for (int action_dim : {1, 3, 7, 9}) {
    ReachTask task(action_dim, 48, 9);
    const int n = action_dim;
    Batch b = Draw(task, 0, 0, 64);
    int grasped = 0;
    for (int i = 0; i < 64; ++i) {
      const float* o = b.obs.data() + i * task.obs_dim();
      const float* chunk = b.chunks.data() + i * task.chunk_dim();
      std::vector<double> c(o, o + n), g(o + n, o + 2 * n);
      const double before = task.PositionError(c.data(), g.data());
      std::vector<double> a(n);
      for (int t = 0; t < task.horizon(); ++t) {
        for (int j = 0; j < n; ++j) a[j] = chunk[t * n + j];
        task.ApplyAction(a.data(), c.data());
      }
      const double after = task.PositionError(c.data(), g.data());
      EXPECT_LE(after, before + 1e-6) << "action_dim " << n << " sample " << i;
      EXPECT_LT(after, ReachTask::kGraspRadius) << "action_dim " << n << " sample " << i;
      for (int j = 3; j < n; ++j) {
        if (j != ReachTask::kGripper) {
          EXPECT_NEAR(c[j], g[j], 0.01) << "coordinate " << j;
        }
      }
      if (n > ReachTask::kGripper) {
        grasped += chunk[(task.horizon() - 1) * n + ReachTask::kGripper] == 1.0f;
      }
    }
    if (n > ReachTask::kGripper) {
      EXPECT_EQ(grasped, 64);
    }
  }
}

}  // namespace
}  // namespace engine
