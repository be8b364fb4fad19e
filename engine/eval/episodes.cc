#include "engine/eval/episodes.h"

#include <algorithm>

#include "common/rng.h"

namespace engine::eval {
namespace {

constexpr uint64_t kEvalTag = 0x6576616cULL;  // "eval"
// Far past any task's step limit (ReachVecEnv's is the spec's, ≤ 100,000): a guard, not a rule.
constexpr int kMaxGroupSteps = 200000;

}  // namespace

common::Result<TaskEvalResult> EvaluateTask(PolicyActor& actor, const sim::EnvSpec& env_spec,
                                            int episodes, uint64_t seed) {
  if (episodes < 1 || episodes > kMaxEvalEpisodes) {
    return common::InvalidArgument("episodes must be 1.." + std::to_string(kMaxEvalEpisodes));
  }
  if (env_spec.action_dim != actor.action_dim()) {
    return common::InvalidArgument("the policy acts in " + std::to_string(actor.action_dim()) +
                                   " dimensions, the environment in " +
                                   std::to_string(env_spec.action_dim));
  }
  TaskEvalResult r;
  r.task = env_spec.task;
  double returns = 0.0, lengths = 0.0;
  std::vector<float> actions;
  sim::StepResult step;
  for (int first = 0, group = 0; first < episodes; first += kMaxEvalBatch, ++group) {
    sim::EnvSpec spec = env_spec;
    spec.num_envs = std::min(kMaxEvalBatch, episodes - first);
    EMBODY_ASSIGN_OR_RETURN(env, sim::MakeVecEnv(spec));
    env->Reset(common::Rng::ForKey(seed, kEvalTag, static_cast<uint64_t>(group)).NextU64());
    std::vector<uint8_t> ended(spec.num_envs, 0);
    int open = spec.num_envs;
    for (int t = 0; open > 0; ++t) {
      if (t >= kMaxGroupSteps) return common::Internal("an evaluation episode did not end");
      const uint64_t key = common::Rng::ForKey(seed, kEvalTag, static_cast<uint64_t>(group),
                                               static_cast<uint64_t>(t))
                               .NextU64();
      EMBODY_RETURN_IF_ERROR(actor.Act(env->observations(), key, &actions));
      EMBODY_RETURN_IF_ERROR(env->Step(actions, &step));
      for (int e = 0; e < spec.num_envs; ++e) {
        if (ended[e] || !step.done[e]) continue;
        ended[e] = 1;
        --open;
        r.successes += step.success[e];
        returns += step.episode_return[e];
        lengths += step.episode_length[e];
      }
    }
  }
  r.episodes = episodes;
  r.success_rate = static_cast<double>(r.successes) / episodes;
  r.mean_return = returns / episodes;
  r.mean_length = lengths / episodes;
  return r;
}

nlohmann::json ToJson(const TaskEvalResult& r) {
  return {{"task", r.task},
          {"episodes", r.episodes},
          {"successes", r.successes},
          {"success_rate", r.success_rate},
          {"mean_return", r.mean_return},
          {"mean_length", r.mean_length}};
}

}  // namespace engine::eval
