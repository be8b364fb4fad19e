// Test fixtures for engine/model tests: random policy samples of small, varied shapes and the
// batches built from them. Header-only; tests only.
#pragma once

#include <numeric>
#include <vector>

#include "common/rng.h"
#include "engine/data/packing.h"
#include "engine/model/flow_matching.h"
#include "engine/model/packed_batch.h"

namespace engine::testing {

struct SampleShape {
  int language;
  int frames;
  int cameras;
};

// One random sample per shape: token ids < vocab, N(0, 1) patches, states, actions, noise, and a
// flow time drawn from the training schedule.
inline std::vector<PolicySample> RandomSamples(common::Rng& rng,
                                               const std::vector<SampleShape>& shapes, int vocab,
                                               int action_horizon, int action_dim,
                                               int patches_per_camera) {
  std::vector<PolicySample> out;
  for (const SampleShape& sh : shapes) {
    PolicySample s;
    for (int i = 0; i < sh.language; ++i) {
      s.language.push_back(static_cast<int32_t>(rng.NextU64() % vocab));
    }
    s.frames = sh.frames;
    s.cameras = sh.cameras;
    s.patches_per_camera = patches_per_camera;
    s.patches.resize(static_cast<size_t>(sh.frames) * sh.cameras * patches_per_camera * kPatchDim);
    for (float& x : s.patches) x = static_cast<float>(rng.Normal());
    s.states.resize(static_cast<size_t>(sh.frames) * kStateDim);
    for (float& x : s.states) x = static_cast<float>(rng.Normal());
    s.actions.resize(static_cast<size_t>(action_horizon) * action_dim);
    for (float& x : s.actions) x = static_cast<float>(rng.Uniform(-1.0, 1.0));
    DrawFlowNoise(rng, &s);
    s.weight = static_cast<float>(rng.Uniform(0.5, 1.5));
    out.push_back(std::move(s));
  }
  return out;
}

inline std::vector<int32_t> Lengths(const std::vector<PolicySample>& samples, int action_horizon) {
  std::vector<int32_t> n;
  for (const auto& s : samples) n.push_back(s.NumTokens(action_horizon));
  return n;
}

// Packs samples best-fit decreasing into rows of T tokens.
inline PackedBatch PackedBatchOf(const std::vector<PolicySample>& samples, int T,
                                 int action_horizon, int action_dim) {
  auto plan = data::PackBestFitDecreasing(Lengths(samples, action_horizon), T);
  return BuildPackedBatch(samples, plan.value(), action_horizon, action_dim).value();
}

// One sample per row, rows T tokens long.
inline PackedBatch PaddedBatchOf(const std::vector<PolicySample>& samples, int T,
                                 int action_horizon, int action_dim) {
  auto plan = OneSamplePerRow(Lengths(samples, action_horizon), T);
  return BuildPackedBatch(samples, plan.value(), action_horizon, action_dim).value();
}

}  // namespace engine::testing
