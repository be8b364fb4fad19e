#include "controlplane/service/plan_watch.h"

#include <memory>

#include "planner/plan_request.h"

namespace controlplane::service {
namespace {

using nlohmann::json;

// Attempts followed at once; past it the table starts afresh (a job then loses its run of
// slow steps, not its prediction, which is recomputed).
constexpr size_t kMaxJobs = 100'000;

json Request(const json& spec, int ranks, const json& cluster) {
  json options = json::object();
  const json* engine = spec.contains("engine") && spec["engine"].is_object() ? &spec["engine"]
                                                                              : nullptr;
  if (engine && engine->value("precision", std::string()) == "bf16") options["precision"] = "bf16";
  if (engine && engine->contains("fp8") && (*engine)["fp8"].is_object() &&
      (*engine)["fp8"].value("allreduce", false)) {
    options["fp8_allreduce"] = true;
  }
  return {{"job", spec}, {"gpus", {ranks}}, {"cluster", cluster}, {"options", options}};
}

}  // namespace

common::Result<std::unique_ptr<PlanWatch>> PlanWatch::Make(PlanWatchOptions options) {
  if (!(options.ratio > 1.0) || options.ratio > 100) {
    return common::InvalidArgument("plan deviation ratio must be in (1, 100]");
  }
  if (options.steps < 1 || options.steps > 1'000'000) {
    return common::InvalidArgument("plan deviation steps must be in [1, 1000000]");
  }
  EMBODY_ASSIGN_OR_RETURN(cluster, planner::ParseCluster(options.cluster, "cluster"));
  (void)cluster;
  return std::unique_ptr<PlanWatch>(new PlanWatch(std::move(options)));
}

std::optional<double> PlanWatch::Predict(const json& spec, int ranks) const {
  if (ranks < 1 || !spec.is_object()) return std::nullopt;
  api::SpecLimits limits;  // the plan's own rank limits apply (ParsePlanRequest)
  auto request = planner::ParsePlanRequest(Request(spec, ranks, options_.cluster), limits);
  if (!request.ok()) return std::nullopt;
  auto plan = planner::MakePlan(request->workload, request->cluster, request->options,
                                request->gpus);
  if (!plan.ok() || plan->sizes.empty()) return std::nullopt;
  return plan->sizes.front().step_s;
}

PlanWatch::Verdict PlanWatch::Observe(const JobRecord& job, int ranks, int64_t step,
                                      std::optional<double> step_seconds) {
  Verdict v;
  if (job.kind != "train") return v;
  std::unique_lock<std::mutex> lock(mu_);
  auto it = jobs_.find(job.id);
  if (it == jobs_.end() || it->second.attempt != job.attempt || it->second.ranks != ranks) {
    // A new attempt or placement: predict afresh, outside the lock (it parses the spec).
    lock.unlock();
    Attempt fresh;
    fresh.attempt = job.attempt;
    fresh.ranks = ranks;
    fresh.predicted = Predict(job.spec, ranks);
    lock.lock();
    if (jobs_.size() >= kMaxJobs) jobs_.clear();
    it = jobs_.insert_or_assign(job.id, fresh).first;
  }
  Attempt& a = it->second;
  v.predicted_step_seconds = a.predicted;
  // Steps are counted once each, in order: a resent or older step event does not extend a run.
  if (!a.predicted || *a.predicted <= 0 || !step_seconds || step <= a.last_step) return v;
  a.last_step = step;
  if (*step_seconds > options_.ratio * *a.predicted) {
    ++a.slow_run;
  } else {
    a.slow_run = 0;
  }
  if (a.slow_run >= options_.steps && !a.flagged) {
    a.flagged = true;
    ++deviations_;
    v.deviation = json{{"step", step},
                       {"step_seconds", *step_seconds},
                       {"predicted_step_seconds", *a.predicted},
                       {"ratio", *step_seconds / *a.predicted},
                       {"threshold", options_.ratio},
                       {"consecutive_steps", a.slow_run},
                       {"ranks", ranks},
                       {"cluster", options_.cluster.value("name", std::string())}};
  }
  return v;
}

uint64_t PlanWatch::deviations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return deviations_;
}

}  // namespace controlplane::service
