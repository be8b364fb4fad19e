// Evaluation during training (engine.eval_every, engine.eval_episodes): every K steps of a
// behaviour-cloning run, or K updates of an rl run, rank 0 runs the policy on its task's seeded
// episodes (episodes.h) and the step event of that step gains
//   eval_success_rate   successes / episodes      (a ratio: the dashboard charts it as a series)
//   eval_mean_return    the episodes' mean return
//   eval_episodes       how many
// The episodes are the same at every evaluation (seed = the job's engine.seed), so the curve
// compares the policy with itself, not with easier or harder draws.
//
// The task: the sim:* dataset's ("sim:reach" → reach, "sim:push" → push, "sim:pick_place" →
// pick_place) for kind train, engine.rl.task for kind rl; the environment is the one
// eval_policy.h's EnvFor gives (a cloned policy sees what its demonstrations showed).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "api/job_spec.h"
#include "common/status.h"
#include "engine/model/policy_transformer.h"
#include "engine/policy/actor_critic.h"
#include "engine/sim/make_env.h"

namespace engine::eval {

class PeriodicEval {
 public:
  // Disabled (Due is always false) when engine.eval_every is 0. Errors: a dataset that names
  // no built-in task.
  static common::Result<PeriodicEval> ForTraining(const api::EngineOptions& engine);
  static common::Result<PeriodicEval> ForRl(const api::EngineOptions& engine);

  bool Due(int64_t step) const { return every_ > 0 && step % every_ == 0; }
  // Evaluates and adds the fields above to *event.
  common::Status Run(PolicyTransformer& model, nlohmann::json* event) const;
  common::Status Run(ActorCritic& policy, nlohmann::json* event) const;

 private:
  PeriodicEval(const api::EngineOptions& engine, bool rl_policy, const std::string& task);

  int every_ = 0;
  int episodes_ = 0;
  uint64_t seed_ = 0;
  int inference_steps_ = 1;
  sim::EnvSpec env_;
};

}  // namespace engine::eval
