#include "engine/jobs/eval.h"

#include <cstdio>

#include "common/file_util.h"
#include "common/log.h"
#include "engine/eval/eval_policy.h"
#include "engine/jobs/job.h"

namespace engine::eval {

common::Result<EvalJobResult> RunEvalJob(const api::JobSpec& spec,
                                         const std::string& checkpoint_path, EventSink* events) {
  if (spec.kind != api::JobKind::kEval) return common::InvalidArgument("not a job of kind eval");
  if (checkpoint_path.empty()) {
    return common::InvalidArgument(
        "no checkpoint to evaluate (EMBODY_RESUME_FROM is unset; the server sets it from "
        "eval.checkpoint or eval.checkpoint_from_job)");
  }
  auto bytes = common::ReadFile(checkpoint_path);
  if (!bytes.ok()) {
    return common::NotFound("checkpoint " + checkpoint_path + ": " + bytes.status().message());
  }
  auto loaded = LoadEvalPolicy(*bytes, spec.eval.fp8);
  if (!loaded.ok()) {
    return common::InvalidArgument("checkpoint " + checkpoint_path + ": " +
                                   loaded.status().message());
  }
  EvalPolicy& policy = *loaded;
  EvalJobResult out;
  out.policy = policy.kind;
  out.fp8 = policy.fp8;
  out.checkpoint_step = policy.step;
  common::LogInfo("eval", {{"checkpoint", checkpoint_path},
                           {"policy", policy.kind},
                           {"fp8", policy.fp8 ? "true" : "false"},
                           {"episodes", std::to_string(spec.eval.episodes)}});
  nlohmann::json tasks = nlohmann::json::array();
  for (const std::string& task : spec.eval.tasks) {
    auto r = EvaluateTask(*policy.actor, EnvFor(policy, task), spec.eval.episodes, spec.eval.seed);
    if (!r.ok()) return common::InvalidArgument("task " + task + ": " + r.status().message());
    tasks.push_back(ToJson(*r));
    out.tasks.push_back(*r);
  }
  std::printf("eval: %s policy%s at step %lld, seed %llu\n", out.policy.c_str(),
              out.fp8 ? " (fp8)" : "", static_cast<long long>(out.checkpoint_step),
              static_cast<unsigned long long>(spec.eval.seed));
  std::printf("%-12s %9s %10s %13s %12s\n", "task", "episodes", "successes", "success_rate",
              "mean_return");
  for (const TaskEvalResult& r : out.tasks) {
    std::printf("%-12s %9d %10d %13.3f %12.3f\n", r.task.c_str(), r.episodes, r.successes,
                r.success_rate, r.mean_return);
  }
  std::fflush(stdout);
  if (events != nullptr) {
    events->Post({{"type", "eval"},
                  {"policy", out.policy},
                  {"fp8", out.fp8},
                  {"checkpoint_step", out.checkpoint_step},
                  {"seed", spec.eval.seed},
                  {"tasks", tasks}});
  }
  return out;
}

}  // namespace engine::eval

namespace engine::jobs {

JobEnd Eval(const JobContext& context, Communicator&, EventSink* events, const std::atomic<bool>*) {
  auto ev = eval::RunEvalJob(context.spec, context.env.resume_from, events);
  JobEnd end;
  if (!ev.ok()) end.error = ev.status().ToString();  // one rank: nothing to abort
  return end;
}

}  // namespace engine::jobs
