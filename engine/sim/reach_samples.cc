#include "engine/sim/reach_samples.h"

#include <algorithm>
#include <cmath>

#include "common/rng.h"
#include "engine/model/flow_matching.h"

namespace engine {
namespace {

constexpr int kPatchSide = 8;
constexpr double kBlobSigma = 0.08;  // m, in the 1 m workspace

// The range a goal coordinate is drawn from (ReachTask::SampleAt): positions ±0.5 m, the rest ±1.
double CoordinateHalfRange(int j) { return j < 3 ? 0.5 : 1.0; }

int GoalToken(int j, double g) {
  const double h = CoordinateHalfRange(j);
  const int bin =
      std::clamp(static_cast<int>(std::floor((g + h) / (2 * h) * kGoalBins)), 0, kGoalBins - 1);
  return (j % (kFillerBase / kGoalBins)) * kGoalBins + bin;
}

// Renders camera `cam`'s view with the target at `target` and the end effector at `ee` (3
// coordinates each, workspace metres) into `patches` (grid² patches would cover the image;
// the first `count` are written, row-major over the grid, HWC within a patch).
void RenderCamera(int cam, const double* target, const double* ee, double gripper, int count,
                  float* patches) {
  static constexpr int kAxes[3][2] = {{0, 1}, {0, 2}, {1, 2}};
  const int* axes = kAxes[cam % 3];
  const int grid = static_cast<int>(std::ceil(std::sqrt(static_cast<double>(count))));
  const int side = grid * kPatchSide;
  // Separable Gaussian blobs: per image column (first axis) and row (second axis).
  float tu[64], tv[64], eu[64], ev[64];
  const double inv = 1.0 / (2.0 * kBlobSigma * kBlobSigma);
  for (int p = 0; p < side && p < 64; ++p) {
    const double w = (p + 0.5) / side - 0.5;
    tu[p] = static_cast<float>(std::exp(-(w - target[axes[0]]) * (w - target[axes[0]]) * inv));
    tv[p] = static_cast<float>(std::exp(-(w - target[axes[1]]) * (w - target[axes[1]]) * inv));
    eu[p] = static_cast<float>(std::exp(-(w - ee[axes[0]]) * (w - ee[axes[0]]) * inv));
    ev[p] = static_cast<float>(std::exp(-(w - ee[axes[1]]) * (w - ee[axes[1]]) * inv));
  }
  const float blue = static_cast<float>(0.5 + 0.5 * gripper);
  for (int k = 0; k < count; ++k) {
    const int gy = k / grid, gx = k % grid;
    float* patch = patches + static_cast<size_t>(k) * kPatchDim;
    for (int iy = 0; iy < kPatchSide; ++iy) {
      const int y = std::min(gy * kPatchSide + iy, 63);
      for (int ix = 0; ix < kPatchSide; ++ix) {
        const int x = std::min(gx * kPatchSide + ix, 63);
        float* px = patch + (iy * kPatchSide + ix) * 3;
        px[0] = tu[x] * tv[y];
        px[1] = eu[x] * ev[y];
        px[2] = blue;
      }
    }
  }
}

}  // namespace

void MakeReachSample(const ReachTask& task, uint64_t index, uint64_t sample_seed,
                     const data::SampleComposition& comp, int vocab, PolicySample* out) {
  const int n = task.action_dim();
  // The demonstration: observation (c, g, distractors) and the expert chunk.
  float obs[2 * 64 + ReachTask::kDistractors];
  out->actions.resize(static_cast<size_t>(task.chunk_dim()));
  task.SampleAt(index, obs, out->actions.data());
  const float* c = obs;
  const float* g = obs + n;
  common::Rng rng = common::Rng::ForKey(sample_seed, 0x73616d706c65ULL);  // "sample"

  // Language: goal coordinates (twice round), then filler words.
  out->language.resize(comp.language_tokens);
  const int fillers = std::max(1, vocab - kFillerBase);
  for (int k = 0; k < comp.language_tokens; ++k) {
    out->language[k] = k < 2 * n ? GoalToken(k % n, g[k % n])
                                 : kFillerBase + static_cast<int>(rng.NextU64() % fillers);
  }

  // Frames: the end effector now (last frame) and one expert step back per earlier frame.
  out->frames = comp.frames;
  out->cameras = comp.cameras;
  out->patches_per_camera = comp.patch_tokens_per_camera;
  const int per_camera = comp.patch_tokens_per_camera;
  out->patches.resize(static_cast<size_t>(comp.frames) * comp.cameras * per_camera * kPatchDim);
  out->state_tokens = 1;
  out->states.assign(static_cast<size_t>(comp.frames) * kStateDim, 0.0f);
  double target[3] = {0, 0, 0}, now[3] = {0, 0, 0};
  for (int j = 0; j < std::min(n, 3); ++j) {
    target[j] = g[j];
    now[j] = c[j];
  }
  const double gripper = n > ReachTask::kGripper ? c[ReachTask::kGripper] : -1.0;
  for (int f = 0; f < comp.frames; ++f) {
    const int back = comp.frames - 1 - f;
    double ee[3];
    for (int j = 0; j < 3; ++j) {
      ee[j] = now[j] - back * ReachTask::kMaxStep * (j < n ? out->actions[j] : 0.0f);
    }
    for (int cam = 0; cam < comp.cameras; ++cam) {
      float* dst = out->patches.data() +
                   static_cast<size_t>(f * comp.cameras + cam) * per_camera * kPatchDim;
      RenderCamera(cam, target, ee, gripper, per_camera, dst);
    }
    float* st = out->states.data() + static_cast<size_t>(f) * kStateDim;
    for (int j = 0; j < std::min(n, kStateDim); ++j) {
      st[j] = static_cast<float>(c[j] - (j < 3 ? now[j] - ee[j] : 0.0));
    }
  }
  out->weight = 1.0f;
  DrawFlowNoise(rng, out);
}

void ReachTask::MakeSample(uint64_t index, uint64_t sample_seed,
                           const data::SampleComposition& comp, int vocab,
                           PolicySample* out) const {
  MakeReachSample(*this, index, sample_seed, comp, vocab, out);
}

}  // namespace engine
