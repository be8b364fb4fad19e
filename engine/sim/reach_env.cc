#include "engine/sim/reach_env.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/rng.h"
#include "engine/sim/reach_samples.h"

namespace engine::sim {
namespace {

constexpr int kSide = kCameraPixels;  // 32×32 pixels, 4×4 patches of 8×8
constexpr int kPatchSide = 8;
constexpr int kPatchesPerCamera = (kSide / kPatchSide) * (kSide / kPatchSide);
constexpr double kBlobSigma = 0.08;              // metres, in the 1 m workspace
constexpr uint64_t kEpisodeTag = 0x65706973ULL;  // "epis"

// The demonstrations' goal token: coordinate j's bin of kGoalBins over its range.
int GoalToken(int j, double g) {
  const double h = j < 3 ? 0.5 : 1.0;
  const int bin =
      std::clamp(static_cast<int>(std::floor((g + h) / (2 * h) * kGoalBins)), 0, kGoalBins - 1);
  return (j % (kFillerBase / kGoalBins)) * kGoalBins + bin;
}

// Camera `cam` (0 top (x, y), 1 front (x, z), 2 side (y, z)) into kPatchesPerCamera patches,
// row-major over the 4×4 grid, HWC within a patch.
void Render(int cam, const double* target, const double* ee, double gripper, float* patches) {
  static constexpr int kAxes[3][2] = {{0, 1}, {0, 2}, {1, 2}};
  const int u = kAxes[cam][0], v = kAxes[cam][1];
  const double inv = 1.0 / (2.0 * kBlobSigma * kBlobSigma);
  float tu[kSide], tv[kSide], eu[kSide], ev[kSide];
  for (int p = 0; p < kSide; ++p) {
    const double w = (p + 0.5) / kSide - 0.5;
    tu[p] = static_cast<float>(std::exp(-(w - target[u]) * (w - target[u]) * inv));
    tv[p] = static_cast<float>(std::exp(-(w - target[v]) * (w - target[v]) * inv));
    eu[p] = static_cast<float>(std::exp(-(w - ee[u]) * (w - ee[u]) * inv));
    ev[p] = static_cast<float>(std::exp(-(w - ee[v]) * (w - ee[v]) * inv));
  }
  const float blue = static_cast<float>(0.5 + 0.5 * gripper);
  const int grid = kSide / kPatchSide;
  for (int k = 0; k < kPatchesPerCamera; ++k) {
    float* patch = patches + static_cast<size_t>(k) * kPatchDim;
    for (int iy = 0; iy < kPatchSide; ++iy) {
      const int y = (k / grid) * kPatchSide + iy;
      for (int ix = 0; ix < kPatchSide; ++ix) {
        const int x = (k % grid) * kPatchSide + ix;
        float* px = patch + (iy * kPatchSide + ix) * 3;
        px[0] = tu[x] * tv[y];
        px[1] = eu[x] * ev[y];
        px[2] = blue;
      }
    }
  }
}

}  // namespace

common::Status ReachEnvConfig::Validate() const {
  if (num_envs < 1) return common::InvalidArgument("num_envs must be ≥ 1");
  if (action_dim < 1 || action_dim > 64) return common::InvalidArgument("action_dim: 1..64");
  if (cameras < 0 || cameras > 3) return common::InvalidArgument("cameras: 0..3");
  if (episode_steps < 1) return common::InvalidArgument("episode_steps must be ≥ 1");
  if (!(success_radius > 0.0)) return common::InvalidArgument("success_radius must be > 0");
  if (vocab < kFillerBase) {
    return common::InvalidArgument("vocab must be ≥ " + std::to_string(kFillerBase));
  }
  return common::Status::Ok();
}

common::Result<std::unique_ptr<ReachVecEnv>> ReachVecEnv::Create(const ReachEnvConfig& config) {
  EMBODY_RETURN_IF_ERROR(config.Validate());
  return std::unique_ptr<ReachVecEnv>(new ReachVecEnv(config));
}

ReachVecEnv::ReachVecEnv(const ReachEnvConfig& config)
    : config_(config), task_(config.action_dim, /*horizon=*/1, /*seed=*/0) {
  const size_t n = static_cast<size_t>(config.num_envs) * config.action_dim;
  c_.assign(n, 0.0);
  g_.assign(n, 0.0);
  episode_.assign(config.num_envs, 0);
  steps_.assign(config.num_envs, 0);
  return_.assign(config.num_envs, 0.0f);
  obs_.resize(config.num_envs);
  Reset(0);
}

void ReachVecEnv::Reset(uint64_t seed) {
  seed_ = seed;
  std::fill(episode_.begin(), episode_.end(), 0);
  for (int e = 0; e < config_.num_envs; ++e) StartEpisode(e);
}

void ReachVecEnv::StartEpisode(int e) {
  const int n = config_.action_dim;
  double* c = c_.data() + static_cast<size_t>(e) * n;
  double* g = g_.data() + static_cast<size_t>(e) * n;
  common::Rng rng = common::Rng::ForKey(seed_, kEpisodeTag, static_cast<uint64_t>(e),
                                        static_cast<uint64_t>(episode_[e]));
  for (int j = 0; j < n; ++j) {
    if (j < 3) {
      c[j] = rng.Uniform(-0.5, 0.5);
      g[j] = rng.Uniform(-0.5, 0.5);
    } else if (j == ReachTask::kGripper) {
      c[j] = rng.Uniform() < 0.5 ? -1.0 : 1.0;
      g[j] = 1.0;
    } else {
      c[j] = rng.Uniform(-1.0, 1.0);
      g[j] = rng.Uniform(-1.0, 1.0);
    }
  }
  steps_[e] = 0;
  return_[e] = 0.0f;
  Observe(e);
}

void ReachVecEnv::Observe(int e) {
  const int n = config_.action_dim;
  const double* c = c_.data() + static_cast<size_t>(e) * n;
  const double* g = g_.data() + static_cast<size_t>(e) * n;
  PolicySample& s = obs_[e];
  s.language.resize(2 * n);
  for (int k = 0; k < 2 * n; ++k) s.language[k] = GoalToken(k % n, g[k % n]);
  s.frames = 1;
  s.cameras = config_.cameras;
  s.patches_per_camera = kPatchesPerCamera;
  s.patches.resize(static_cast<size_t>(config_.cameras) * kPatchesPerCamera * kPatchDim);
  double target[3] = {0, 0, 0}, ee[3] = {0, 0, 0};
  for (int j = 0; j < std::min(n, 3); ++j) {
    target[j] = g[j];
    ee[j] = c[j];
  }
  const double gripper = n > ReachTask::kGripper ? c[ReachTask::kGripper] : -1.0;
  for (int cam = 0; cam < config_.cameras; ++cam) {
    Render(cam, target, ee, gripper,
           s.patches.data() + static_cast<size_t>(cam) * kPatchesPerCamera * kPatchDim);
  }
  s.states.assign(kStateDim, 0.0f);
  for (int j = 0; j < std::min(n, kStateDim); ++j) s.states[j] = static_cast<float>(c[j]);
  if (config_.goal_in_state && 2 * n <= kStateDim) {
    for (int j = 0; j < n; ++j) s.states[n + j] = static_cast<float>(g[j]);
  }
  s.actions.clear();
  s.noise.clear();
  s.time = 0.0f;
  s.weight = 1.0f;
}

common::Status ReachVecEnv::Step(std::span<const float> actions, StepResult* out) {
  const int N = config_.num_envs, n = config_.action_dim;
  EMBODY_RETURN_IF_ERROR(CheckActions(actions, N, n));
  out->Reset(N);
  double a[64];
  for (int e = 0; e < N; ++e) {
    double* c = c_.data() + static_cast<size_t>(e) * n;
    const double* g = g_.data() + static_cast<size_t>(e) * n;
    const double before = task_.PositionError(c, g);
    for (int j = 0; j < n; ++j) {
      a[j] = std::clamp(static_cast<double>(actions[static_cast<size_t>(e) * n + j]), -1.0, 1.0);
    }
    task_.ApplyAction(a, c);
    const double after = task_.PositionError(c, g);
    const bool success = after < config_.success_radius;
    ++steps_[e];
    double r = before - after;
    if (success) r += config_.success_bonus;
    out->reward[e] = static_cast<float>(r);
    return_[e] += static_cast<float>(r);
    if (success || steps_[e] >= config_.episode_steps) {
      out->done[e] = 1;
      out->success[e] = success ? 1 : 0;
      out->episode_return[e] = return_[e];
      out->episode_length[e] = steps_[e];
      ++episode_[e];
      StartEpisode(e);
    } else {
      Observe(e);
    }
  }
  return common::Status::Ok();
}

std::vector<float> ReachVecEnv::ExpertActions() const {
  const int n = config_.action_dim;
  std::vector<float> out(static_cast<size_t>(config_.num_envs) * n);
  double a[64];
  for (int e = 0; e < config_.num_envs; ++e) {
    const size_t o = static_cast<size_t>(e) * n;
    task_.ExpertAction(c_.data() + o, g_.data() + o, a);
    for (int j = 0; j < n; ++j) out[o + j] = static_cast<float>(a[j]);
  }
  return out;
}

double ReachVecEnv::Distance(int e) const {
  const size_t o = static_cast<size_t>(e) * config_.action_dim;
  return task_.PositionError(c_.data() + o, g_.data() + o);
}

}  // namespace engine::sim
