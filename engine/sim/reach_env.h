// ReachVecEnv: the kinematic reach task (engine/sim/reach_task.h) as a real environment for RL,
// behind the VecEnv interface (vec_env.h).
//
// State per environment: the controlled coordinates c and the goal g of ReachTask (drawn as its
// demonstrations draw them: positions uniform in the 1 m box, orientation and auxiliary joints in
// ±1 rad, the gripper open or closed; the goal's gripper is "grasp"). Dynamics: ReachTask's
// ApplyAction on the action clipped to [-1, 1]. Reward per step: the decrease of the
// end-effector's distance to the target position (metres; negative when it moves away), plus
// success_bonus on the step that reaches it. An episode ends on success (distance below
// success_radius) or after episode_steps steps; the environment then starts its next episode.
//
// Observation (the modalities of reach_samples.h's demonstrations, one frame):
//   language  the goal coordinates, each quantised to kGoalBins bins, twice round (2·action_dim
//             tokens, the same ids as the demonstrations' instruction);
//   images    `cameras` (0-3) 32×32 views rendered from the state: red blob at the target,
//             green at the end effector, blue the gripper (16 patches each);
//   state     c, then g where 2·action_dim ≤ kStateDim and goal_in_state. The demonstrations' state token holds c
//             only; RL also gives the goal there so a small policy learns from few env steps
//             (a behaviour-cloned trunk sees the extra entries as new inputs it adapts to).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/sim/vec_env.h"
#include "engine/sim/reach_task.h"

namespace engine::sim {

struct ReachEnvConfig {
  int num_envs = 16;
  int action_dim = 7;
  int cameras = 1;  // 0..3
  int episode_steps = 50;
  double success_radius = ReachTask::kGraspRadius;  // metres
  double success_bonus = 1.0;
  int vocab = 512;  // the policy's; goal tokens are < 256
  // Give g in the state token (where 2·action_dim ≤ kStateDim). Off, the state token is the
  // demonstrations' (c only): how a behaviour-cloned policy is evaluated.
  bool goal_in_state = true;

  common::Status Validate() const;
};

class ReachVecEnv final : public VecEnv {
 public:
  static common::Result<std::unique_ptr<ReachVecEnv>> Create(const ReachEnvConfig& config);

  int num_envs() const override { return config_.num_envs; }
  int action_dim() const override { return config_.action_dim; }
  void Reset(uint64_t seed) override;
  common::Status Step(std::span<const float> actions, StepResult* out) override;
  const std::vector<PolicySample>& observations() const override { return obs_; }

  // The expert's action (ReachTask::ExpertAction) for every environment's current state,
  // (num_envs, action_dim): a reference policy for tests.
  std::vector<float> ExpertActions() const;
  double Distance(int env) const;

 private:
  explicit ReachVecEnv(const ReachEnvConfig& config);
  void StartEpisode(int env);
  void Observe(int env);

  ReachEnvConfig config_;
  ReachTask task_;
  uint64_t seed_ = 0;
  std::vector<double> c_, g_;  // (num_envs, action_dim) each
  std::vector<int64_t> episode_;
  std::vector<int32_t> steps_;
  std::vector<float> return_;
  std::vector<PolicySample> obs_;
};

}  // namespace engine::sim
