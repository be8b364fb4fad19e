#include "engine/eval/periodic_eval.h"

#include "engine/eval/episodes.h"
#include "engine/eval/eval_policy.h"
#include "engine/eval/policy_actor.h"

namespace engine::eval {
namespace {

void AddFields(const TaskEvalResult& r, nlohmann::json* event) {
  (*event)["eval_success_rate"] = r.success_rate;
  (*event)["eval_mean_return"] = r.mean_return;
  (*event)["eval_episodes"] = r.episodes;
}

}  // namespace

PeriodicEval::PeriodicEval(const api::EngineOptions& engine, bool rl_policy,
                           const std::string& task)
    : every_(engine.eval_every),
      episodes_(engine.eval_episodes),
      seed_(engine.seed),
      inference_steps_(engine.model.inference_steps),
      env_(EnvFor(engine, rl_policy, task)) {}

common::Result<PeriodicEval> PeriodicEval::ForTraining(const api::EngineOptions& engine) {
  if (engine.eval_every == 0) return PeriodicEval(engine, false, "reach");
  const std::string prefix = "sim:";
  const std::string& d = engine.data.dataset;
  const std::string task = d.rfind(prefix, 0) == 0 ? d.substr(prefix.size()) : "";
  if (!sim::IsEnvTask(task)) {
    return common::InvalidArgument("evaluation during training needs a built-in sim: dataset, "
                                   "not \"" + d + "\"",
                                   "engine.eval_every");
  }
  return PeriodicEval(engine, false, task);
}

common::Result<PeriodicEval> PeriodicEval::ForRl(const api::EngineOptions& engine) {
  return PeriodicEval(engine, true, engine.rl.task);
}

common::Status PeriodicEval::Run(PolicyTransformer& model, nlohmann::json* event) const {
  FlowPolicyActor actor(model, inference_steps_);
  EMBODY_ASSIGN_OR_RETURN(r, EvaluateTask(actor, env_, episodes_, seed_));
  AddFields(r, event);
  return common::Status::Ok();
}

common::Status PeriodicEval::Run(ActorCritic& policy, nlohmann::json* event) const {
  GaussianMeanActor actor(policy);
  EMBODY_ASSIGN_OR_RETURN(r, EvaluateTask(actor, env_, episodes_, seed_));
  AddFields(r, event);
  return common::Status::Ok();
}

}  // namespace engine::eval
