// The tiny training run the engine's tests share: a 2-layer policy transformer (d_model 48,
// 4 heads, MLP 96, action chunks of 4 × 7) on two packed rows of 512 tokens per step (13 reach
// samples), AdamW at 4e-3 with 10 warm-up steps, no progress printing. Tests change what they
// are about on the copy they get.
#pragma once

#include <cstddef>
#include <cstdint>
#include <numeric>
#include <vector>

#include "engine/train/trainer.h"

namespace engine::testing {

inline TrainerOptions SmallRun(int steps, uint64_t seed = 1) {
  TrainerOptions o;
  o.engine.model.d_model = 48;
  o.engine.model.layers = 2;
  o.engine.model.heads = 4;
  o.engine.model.mlp = 96;
  o.engine.model.action_horizon = 4;
  o.engine.model.action_dim = 7;
  o.engine.data.rows_per_step = 2;
  o.engine.data.tokens_per_row = 512;
  o.engine.optim.lr = 4e-3;
  o.engine.optim.steps = steps;
  o.engine.optim.warmup_steps = 10;
  o.engine.seed = seed;
  o.print_progress = false;
  return o;
}

// The mean of v[begin, end): a run's losses over a window of its steps.
inline double Mean(const std::vector<float>& v, size_t begin, size_t end) {
  return std::accumulate(v.begin() + begin, v.begin() + end, 0.0) / (end - begin);
}

}  // namespace engine::testing
