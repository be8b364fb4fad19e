#include "engine/sim/make_env.h"

#include "engine/sim/reach_env.h"
#include "engine/sim/table_env.h"

namespace engine::sim {

bool IsEnvTask(const std::string& task) {
  for (const char* t : kEnvTasks) {
    if (task == t) return true;
  }
  return false;
}

EnvSpec RlEnvSpec(const api::RlOptions& rl, int action_dim, int vocab) {
  EnvSpec s;
  s.task = rl.task;
  s.num_envs = rl.envs;
  s.action_dim = action_dim;
  s.cameras = rl.cameras;
  s.episode_steps = rl.episode_steps;
  s.success_radius = rl.success_radius;
  s.privileged_state = true;
  s.vocab = vocab;
  return s;
}

common::Result<std::unique_ptr<VecEnv>> MakeVecEnv(const EnvSpec& spec) {
  if (spec.task == "reach") {
    ReachEnvConfig c;
    c.num_envs = spec.num_envs;
    c.action_dim = spec.action_dim;
    c.cameras = spec.cameras;
    c.episode_steps = spec.episode_steps;
    c.success_radius = spec.success_radius;
    c.goal_in_state = spec.privileged_state;
    c.vocab = spec.vocab;
    EMBODY_ASSIGN_OR_RETURN(env, ReachVecEnv::Create(c));
    return std::unique_ptr<VecEnv>(std::move(env));
  }
  if (spec.task == "push" || spec.task == "pick_place") {
    TableEnvConfig c;
    c.task = spec.task == "push" ? sim::TaskKind::kPush : sim::TaskKind::kPickPlace;
    c.num_envs = spec.num_envs;
    c.action_dim = spec.action_dim;
    c.cameras = spec.cameras;
    c.episode_steps = spec.episode_steps;
    c.privileged_state = spec.privileged_state;
    c.vocab = spec.vocab;
    EMBODY_ASSIGN_OR_RETURN(env, TableVecEnv::Create(c));
    return std::unique_ptr<VecEnv>(std::move(env));
  }
  return common::InvalidArgument("unknown task \"" + spec.task +
                                 "\"; the tasks are reach, push and pick_place");
}

}  // namespace engine::sim
