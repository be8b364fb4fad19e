#include "engine/sim/reach_task.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/rng.h"

namespace engine {

ReachTask::ReachTask(int action_dim, int horizon, uint64_t seed)
    : action_dim_(action_dim), horizon_(horizon), seed_(seed) {}

double ReachTask::PositionError(const double* c, const double* g) const {
  double sq = 0.0;
  for (int j = 0; j < std::min(action_dim_, 3); ++j) sq += (g[j] - c[j]) * (g[j] - c[j]);
  return std::sqrt(sq);
}

void ReachTask::ExpertAction(const double* c, const double* g, double* action) const {
  for (int j = 0; j < action_dim_; ++j) {
    if (j == kGripper) {
      action[j] = PositionError(c, g) < kGraspRadius ? 1.0 : -1.0;
    } else {
      action[j] = std::clamp(kGain * (g[j] - c[j]) / kMaxStep, -1.0, 1.0);
    }
  }
}

void ReachTask::ApplyAction(const double* action, double* c) const {
  for (int j = 0; j < action_dim_; ++j) {
    if (j == kGripper) {
      c[j] = action[j];  // the gripper command is absolute
    } else {
      c[j] += kMaxStep * action[j];
    }
  }
}

// Tag in the first key slot of SampleAt's streams, so they never coincide with Sample's
// (seed, rank, step, b) streams.
constexpr uint64_t kGlobalStreamTag = 0x676c6f62616cULL;  // "global"

void ReachTask::Sample(uint64_t rank, uint64_t step, int batch, float* obs, float* chunks) const {
  for (int b = 0; b < batch; ++b) {
    SampleFrom(rank, step, static_cast<uint64_t>(b), obs + static_cast<size_t>(b) * obs_dim(),
               chunks + static_cast<size_t>(b) * chunk_dim());
  }
}

void ReachTask::SampleAt(uint64_t index, float* obs, float* chunk) const {
  SampleFrom(kGlobalStreamTag, index, 0, obs, chunk);
}

void ReachTask::SampleFrom(uint64_t key_b, uint64_t key_c, uint64_t key_d, float* o,
                           float* chunk) const {
  const int n = action_dim_;
  std::vector<double> c(n), g(n), a(n);
  common::Rng rng = common::Rng::ForKey(seed_, key_b, key_c, key_d);
  for (int j = 0; j < n; ++j) {
    if (j < 3) {  // position in the workspace box
      c[j] = rng.Uniform(-0.5, 0.5);
      g[j] = rng.Uniform(-0.5, 0.5);
    } else if (j == kGripper) {
      c[j] = rng.Uniform() < 0.5 ? -1.0 : 1.0;
      g[j] = 1.0;
    } else {  // orientation and auxiliary joints
      c[j] = rng.Uniform(-1.0, 1.0);
      g[j] = rng.Uniform(-1.0, 1.0);
    }
  }
  for (int j = 0; j < n; ++j) o[j] = static_cast<float>(c[j]);
  for (int j = 0; j < n; ++j) o[n + j] = static_cast<float>(g[j]);
  for (int d = 0; d < kDistractors; ++d) o[2 * n + d] = static_cast<float>(rng.Normal());
  for (int t = 0; t < horizon_; ++t) {
    ExpertAction(c.data(), g.data(), a.data());
    for (int j = 0; j < n; ++j) chunk[t * n + j] = static_cast<float>(a[j]);
    ApplyAction(a.data(), c.data());
  }
}

}  // namespace engine
