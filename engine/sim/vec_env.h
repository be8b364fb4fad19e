// VecEnv: the environment interface the RL code (engine/rl/) drives: N environments stepped
// together, each observation already in the policy transformer's modalities (a PolicySample's
// context: language tokens, camera patches, proprio state; engine/model/packed_batch.h).
//
// Contract:
//   Reset(seed)      starts a new episode in every environment; the episodes are a pure
//                    function of (seed, environment index, episode number), so the same seed
//                    replays the same run.
//   Step(actions)    applies actions (num_envs, action_dim), row-major, to every environment
//                    and fills one StepResult. An environment whose episode ended in this step
//                    (done) has already been reset: its observation is the next episode's first.
//   observations()   the current observation of each environment (valid until the next Step or
//                    Reset). Their action chunk and noise are empty: the policy fills the action
//                    slots itself.
// Actions are clipped by the environment to its bounds, never rejected: a Gaussian policy's
// samples are unbounded. A simulated task plugs in by implementing this interface (see
// ReachVecEnv in reach_env.h); the RL loops know nothing else about it. Not thread-safe.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/model/packed_batch.h"

namespace engine::sim {

struct StepResult {
  std::vector<float> reward;     // (num_envs)
  std::vector<uint8_t> done;     // (num_envs) the episode ended: success or the step limit
  std::vector<uint8_t> success;  // (num_envs) the episode ended by reaching its goal
  // Undiscounted return and length of the episodes that ended in this step (0 where !done).
  std::vector<float> episode_return;
  std::vector<int32_t> episode_length;

  // Every field sized for `num_envs` environments and zeroed, as a Step starts.
  void Reset(int num_envs) {
    reward.assign(num_envs, 0.0f);
    done.assign(num_envs, 0);
    success.assign(num_envs, 0);
    episode_return.assign(num_envs, 0.0f);
    episode_length.assign(num_envs, 0);
  }
};

// What every Step refuses: actions not (num_envs, action_dim), or a non-finite entry.
inline common::Status CheckActions(std::span<const float> actions, int num_envs, int action_dim) {
  if (actions.size() != static_cast<size_t>(num_envs) * action_dim) {
    return common::InvalidArgument(
        "actions: " + std::to_string(actions.size()) +
        " floats, expected num_envs × action_dim = " + std::to_string(num_envs * action_dim));
  }
  for (float a : actions) {
    if (!std::isfinite(a)) return common::InvalidArgument("actions: a non-finite entry");
  }
  return common::Status::Ok();
}

class VecEnv {
 public:
  virtual ~VecEnv() = default;
  virtual int num_envs() const = 0;
  virtual int action_dim() const = 0;
  virtual void Reset(uint64_t seed) = 0;
  // Errors: actions not (num_envs, action_dim), or a non-finite entry.
  virtual common::Status Step(std::span<const float> actions, StepResult* out) = 0;
  virtual const std::vector<PolicySample>& observations() const = 0;
};

}  // namespace engine::sim
