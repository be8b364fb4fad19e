// The test-sized reach the rl tests share: a position-only arm (action_dim 3), a 10 cm success
// radius, no cameras, a 1-layer policy (d_model 32, 2 heads, MLP 64), 16 environments and
// rollouts of 32 steps, the PPO defaults otherwise, lr 5e-4. Tests change what they are about
// on the copy they get. MeanSuccess reads a run's learning curve.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/rl/sync_ppo.h"

namespace engine::testing {

// A 1-layer policy (2 heads, MLP 2·d_model) on a position-only arm (action_dim 3, no cameras),
// `envs` environments of `rollout_steps` steps a rollout, for `env_steps` environment steps.
inline rl::SyncPpoOptions OneLayerReach(int d_model, int envs, int rollout_steps,
                                        int64_t env_steps) {
  rl::SyncPpoOptions o;
  api::EngineOptions& e = o.engine;
  e.model.d_model = d_model;
  e.model.layers = 1;
  e.model.heads = 2;
  e.model.mlp = 2 * d_model;
  e.model.action_dim = 3;
  e.model.action_horizon = 1;
  e.rl.envs = envs;
  e.rl.rollout_steps = rollout_steps;
  e.rl.total_env_steps = env_steps;
  e.rl.cameras = 0;
  return o;
}

inline rl::SyncPpoOptions SmallReach(int64_t env_steps) {
  rl::SyncPpoOptions o = OneLayerReach(32, 16, 32, env_steps);
  api::EngineOptions& e = o.engine;
  e.seed = 1;
  e.rl.episode_steps = 30;
  e.rl.success_radius = 0.1;
  e.rl.lr = 5e-4;
  return o;
}

// The MPI rl tests' tinier reach: a 1-layer policy (d_model 16, 2 heads, MLP 32) on a
// position-only arm, 4 environments × 8 steps a rollout per acting rank, run for `updates`
// updates of `acting_ranks` ranks' environments.
inline rl::SyncPpoOptions TinyReach(int acting_ranks, int updates, uint64_t seed) {
  rl::SyncPpoOptions o = OneLayerReach(16, 4, 8, int64_t{4} * 8 * acting_ranks * updates);
  o.engine.seed = seed;
  o.engine.rl.minibatches = 2;
  return o;
}

// The mean success rate of updates [begin, end), over those in which an episode ended (0 when
// none did).
inline double MeanSuccess(const std::vector<rl::UpdateRecord>& u, size_t begin, size_t end) {
  double s = 0;
  int n = 0;
  for (size_t i = begin; i < end; ++i) {
    if (std::isfinite(u[i].success_rate)) {
      s += u[i].success_rate;
      ++n;
    }
  }
  return n > 0 ? s / n : 0.0;
}

}  // namespace engine::testing
