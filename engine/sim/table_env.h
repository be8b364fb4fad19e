// TableVecEnv: the table-top tasks push and pick_place (engine/sim/sim_task.h) as environments for
// RL and closed-loop evaluation, behind the VecEnv interface (vec_env.h).
//
// Episodes: environment e's n-th episode is SimTasks::Reset with the seed ForKey(seed, "table",
// e, n), so Reset(seed) replays the same episodes in the same slots. An episode ends on the
// task's success predicate or after `episode_steps` steps (at most the task's own max_steps);
// the environment then starts its next one.
//
// Actions: the policy's layout of sim_samples.h: action_dim 4 is (dx, dy, dz, grip); 7 or more
// is robomimic's (dx, dy, dz, ·, ·, ·, grip, ·...), the entries marked · ignored. Each entry is
// clipped to [-1, 1] by the world.
//
// Reward shaping (docs/rl.md): the task's shaped value S (sim_task.h: −|block_xy − goal_xy| −
// 0.5·|ee − block|, + 0.5 while pick_place holds the block) is a potential; the reward of a step
// is S_after − S_before (metres of progress, negative when the state gets worse), plus
// success_bonus on the step the task succeeds. Potential-based shaping keeps the optimal policy
// of the sparse task while giving PPO a signal on every step; the task's own per-step value
// (a level, not a difference) would instead pay for lingering near the goal.
//
// Observation (one frame, the modalities of the behaviour-cloning samples of sim_samples.h):
//   language  the instruction's word ids (engine/sim/instruction.h), padded with <pad> to
//             language_tokens;
//   images    `cameras` (0-3) 32×32 renders (engine/sim/render.h), 16 patches each;
//   state     the proprioception (render.h: Proprioception) zero-padded to kStateDim; with
//             privileged_state also the object state (render.h: ObjectState, the block's centre
//             (x/0.3, y/0.3, z/0.15 − 1) and the goal (x/0.3, y/0.3)) in entries 4..8, as the
//             demonstrations of sim:push and sim:pick_place carry it: RL from scratch and
//             behaviour-cloned policies are both evaluated with it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/sim/sim_task.h"
#include "engine/sim/vec_env.h"

namespace engine::sim {

struct TableEnvConfig {
  sim::TaskKind task = sim::TaskKind::kPush;
  int num_envs = 16;
  int action_dim = 4;     // 4 or ≥ 7
  int cameras = 1;        // 0..3
  int episode_steps = 0;  // 0: the task's max_steps(); otherwise at most that
  int language_tokens = 8;
  bool privileged_state = false;
  double success_bonus = 1.0;
  int vocab = 512;

  common::Status Validate() const;
};

class TableVecEnv final : public VecEnv {
 public:
  static common::Result<std::unique_ptr<TableVecEnv>> Create(const TableEnvConfig& config);

  int num_envs() const override { return config_.num_envs; }
  int action_dim() const override { return config_.action_dim; }
  void Reset(uint64_t seed) override;
  common::Status Step(std::span<const float> actions, StepResult* out) override;
  const std::vector<PolicySample>& observations() const override { return obs_; }

  // The scripted expert's action for every environment's current state, in the policy's layout
  // (num_envs, action_dim): a reference policy for tests (a function of the state alone).
  std::vector<float> ExpertActions();
  int episode_steps() const { return episode_steps_; }

 private:
  explicit TableVecEnv(const TableEnvConfig& config);
  void StartEpisode(int env);
  void Observe(int env);

  TableEnvConfig config_;
  int episode_steps_;
  sim::SimTasks tasks_;
  uint64_t seed_ = 0;
  std::vector<int64_t> episode_;
  std::vector<float> return_;
  std::vector<double> potential_;
  std::vector<PolicySample> obs_;
  std::vector<float> image_;
};

}  // namespace engine::sim
