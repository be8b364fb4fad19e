// Closed-loop evaluation of a policy on a built-in simulated task: N seeded episodes, success
// rate and mean return.
//
// Episodes run in groups of at most kMaxEvalBatch environments stepped together (one batched
// inference per step). Group g is a VecEnv (engine/sim/make_env.h) reset with
// ForKey(seed, "eval", g); each environment's first episode is the one counted (the VecEnv
// starts another when it ends; those are ignored), and the group steps until every counted
// episode has ended, which the task's step limit bounds. Episode i is therefore a function of
// (task, seed, i) alone and, with a deterministic actor (policy_actor.h: its noise is keyed by
// (seed, g, t)), the result is a pure function of (policy, task, seed, episodes).
//
// Return is the environment's reward summed over the episode (reach_env.h, table_env.h: metres
// of progress plus the success bonus).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "engine/eval/policy_actor.h"
#include "engine/sim/make_env.h"

namespace engine::eval {

inline constexpr int kMaxEvalBatch = 64;
inline constexpr int kMaxEvalEpisodes = 1000;

struct TaskEvalResult {
  std::string task;
  int episodes = 0;
  int successes = 0;
  double success_rate = 0.0;
  double mean_return = 0.0;
  double mean_length = 0.0;  // steps per episode
};

// env.task names the task; env.num_envs is ignored (the groups set it). Errors: episodes outside
// 1..kMaxEvalEpisodes, an environment the spec cannot make, an actor error.
common::Result<TaskEvalResult> EvaluateTask(PolicyActor& actor, const sim::EnvSpec& env,
                                            int episodes, uint64_t seed);

nlohmann::json ToJson(const TaskEvalResult& r);

}  // namespace engine::eval
