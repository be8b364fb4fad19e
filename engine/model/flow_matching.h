// Flow-matching training targets (GR00T N1.5 / π0 convention; docs/design.md, "The engine"):
// t = 0 is pure noise and t = 1 the data, x_t = (1 − t)·noise + t·a, and the model regresses the
// constant velocity a − noise. Inference integrates dx/dt = v(x, t) from t = 0 to 1
// (PolicyTransformer::SampleActions).
//
// Training times follow GR00T N1.5: X ~ Beta(1.5, 1), t = (0.999 − X) / 0.999, which puts more
// weight on noisy inputs (E[t] ≈ 0.40; t is clamped at 0 for X > 0.999). Beta(α, 1) has CDF x^α, so
// X = U^(1/α): one uniform draw, bitwise reproducible through common::Rng.
#pragma once

#include <algorithm>
#include <cmath>

#include "common/rng.h"
#include "engine/model/packed_batch.h"

namespace engine {

inline constexpr double kFlowBetaAlpha = 1.5;
inline constexpr double kFlowTimeMax = 0.999;

inline float SampleFlowTime(common::Rng& rng) {
  const double x = std::pow(rng.Uniform(), 1.0 / kFlowBetaAlpha);
  return static_cast<float>(std::max(0.0, (kFlowTimeMax - x) / kFlowTimeMax));
}

// Draws a sample's flow-matching time and standard normal noise of its actions' shape.
inline void DrawFlowNoise(common::Rng& rng, PolicySample* sample) {
  sample->time = SampleFlowTime(rng);
  sample->noise.resize(sample->actions.size());
  for (float& z : sample->noise) z = static_cast<float>(rng.Normal());
}

}  // namespace engine
