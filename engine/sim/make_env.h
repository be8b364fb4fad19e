// The built-in simulated tasks as VecEnvs, by name: what kind rl trains on (engine.rl.task) and
// what evaluation runs (engine/eval/).
//   "reach"       ReachVecEnv (reach_env.h): ReachTask's kinematics, the task of "sim:reach"
//   "push"        TableVecEnv (table_env.h) on the table-top push task ("sim:push")
//   "pick_place"  TableVecEnv on pick-and-place ("sim:pick_place")
#pragma once

#include <memory>
#include <string>

#include "api/job_spec.h"
#include "common/status.h"
#include "engine/sim/vec_env.h"

namespace engine::sim {

// The task names, for messages and validation.
inline constexpr const char* kEnvTasks[] = {"reach", "push", "pick_place"};
bool IsEnvTask(const std::string& task);

struct EnvSpec {
  std::string task = "reach";
  int num_envs = 16;
  int action_dim = 7;
  int cameras = 1;
  int episode_steps = 50;  // reach's limit; push and pick_place: at most their own max_steps
  double success_radius = 0.05;  // reach only (metres)
  // The extra state entries RL learns from (reach: the goal; push, pick_place: block and goal).
  // A behaviour-cloned policy is evaluated without them: its demonstrations had none.
  bool privileged_state = true;
  int vocab = 512;
};

// The environments an rl job trains on (engine.rl: task, envs, cameras, episode_steps,
// success_radius; privileged state), for a policy of `action_dim` actions and `vocab` words.
// Evaluation of an rl policy uses the same, on the task it asks for.
EnvSpec RlEnvSpec(const api::RlOptions& rl, int action_dim, int vocab);

common::Result<std::unique_ptr<VecEnv>> MakeVecEnv(const EnvSpec& spec);

}  // namespace engine::sim
