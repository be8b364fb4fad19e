#include "controlplane/service/pipeline_driver.h"

#include <map>

#include "controlplane/service/checkpoint_index.h"
#include "controlplane/service/dataset_store.h"
#include "controlplane/service/jobs_service.h"

namespace controlplane::service {

using api::JobState;
using nlohmann::json;

namespace {

bool Failed(const std::string& state) {
  return state == kStepFailed || state == kStepGateFailed || state == kStepSkipped ||
         state == kStepCancelled;
}

void Finish(PipelineStepState& s, const char* state, std::string reason, int64_t now) {
  s.state = state;
  s.reason = std::move(reason);
  s.submitting = nullptr;
  s.finished_ms = now;
}

// Reads the jobs of the steps' latest attempts once per pass.
class JobCache {
 public:
  JobCache(UnitOfWork& uow, int64_t tenant_id) : uow_(uow), tenant_id_(tenant_id) {}
  Result<std::optional<JobRecord>> Get(int64_t id) {
    auto it = jobs_.find(id);
    if (it != jobs_.end()) return it->second;
    EMBODY_ASSIGN_OR_RETURN(job, uow_.jobs().Get(id, tenant_id_, /*for_update=*/false));
    jobs_[id] = job;
    return job;
  }
  void Forget(int64_t id) { jobs_.erase(id); }

 private:
  UnitOfWork& uow_;
  int64_t tenant_id_;
  std::map<int64_t, std::optional<JobRecord>> jobs_;
};

// Why a step must wait, or the reason it failed.
struct Wait {
  bool give_up = false;
  std::string reason;
};

class Advancer {
 public:
  Advancer(UnitOfWork& uow, PipelineRecord& p, const PipelineSpec& spec,
           const PipelineDriverOptions& options, int64_t now)
      : uow_(uow), p_(p), spec_(spec), options_(options), now_(now), jobs_(uow, p.tenant_id) {}

  Result<std::vector<StepSubmission>> Run() {
    if (p_.state == kPipelineCancelling) {
      EMBODY_RETURN_IF_ERROR(Cancel());
      return std::vector<StepSubmission>{};
    }
    // Repeated until nothing moves: a step finishing can make its dependents ready in the same
    // pass (bounded: each round finalises or readies at least one step).
    for (size_t round = 0; round <= p_.steps.size(); ++round) {
      bool moved = false;
      for (size_t i = 0; i < p_.steps.size(); ++i) {
        EMBODY_ASSIGN_OR_RETURN(m, Step(static_cast<int>(i)));
        moved = moved || m;
      }
      if (!moved) break;
    }
    bool all_final = true, all_succeeded = true;
    std::string first_failure;
    for (const PipelineStepState& s : p_.steps) {
      all_final = all_final && IsFinalStepState(s.state);
      all_succeeded = all_succeeded && s.state == kStepSucceeded;
      if (first_failure.empty() && (s.state == kStepFailed || s.state == kStepGateFailed)) {
        first_failure = "step " + s.name + " " + s.state + ": " + s.reason;
      }
    }
    if (all_final) {
      p_.state = all_succeeded ? kPipelineSucceeded : kPipelineFailed;
      p_.reason = all_succeeded ? "every step succeeded" : first_failure;
      p_.finished_ms = now_;
    }
    return std::move(submissions_);
  }

 private:
  const PipelineStepSpec& SpecOf(int i) const { return spec_.steps[i]; }

  // A submission made earlier (this replica before a crash, or another) that committed: its job.
  Result<std::optional<JobRecord>> Submitted(const PipelineStepState& s) {
    const std::string key = StepJobKey(p_, s.name, static_cast<int>(s.jobs.size()));
    return uow_.jobs().GetByIdempotencyKey(p_.tenant_id, key);
  }

  Result<bool> Step(int i) {
    PipelineStepState& s = p_.steps[i];
    if (IsFinalStepState(s.state)) return false;
    if (s.state == kStepRunning) return Running(s, SpecOf(i));
    if (!s.submitting.is_null()) {
      if (SpecOf(i).import_step) return false;  // its own unit of work records it
      EMBODY_ASSIGN_OR_RETURN(found, Submitted(s));
      if (found) {
        Started(s, found->id);
        return true;
      }
      submissions_.push_back({p_.id, i, static_cast<int>(s.jobs.size()),
                              StepJobKey(p_, s.name, static_cast<int>(s.jobs.size())),
                              s.submitting});
      return false;
    }
    // Pending: its needs decide.
    for (const std::string& need : SpecOf(i).needs) {
      const PipelineStepState& n = p_.steps[spec_.Find(need)];
      if (Failed(n.state)) {
        Finish(s, kStepSkipped, "needs " + need + ", which " + n.state, now_);
        return true;
      }
      if (n.state != kStepSucceeded) return false;
    }
    if (SpecOf(i).when && s.gate.is_null()) {
      EMBODY_ASSIGN_OR_RETURN(judged, Judge(s, *SpecOf(i).when));
      if (!judged) return false;  // results still to come
      if (s.state == kStepGateFailed) return true;
    }
    if (SpecOf(i).job.is_null() && !SpecOf(i).import_step) {
      Finish(s, kStepSucceeded, "gate passed", now_);
      if (!s.started_ms) s.started_ms = now_;
      return true;
    }
    const int attempt = static_cast<int>(s.jobs.size());
    json body;
    if (SpecOf(i).import_step) {
      const ImportStep& im = *SpecOf(i).import_step;
      body = {{"import", {{"name", im.dataset_name}, {"source", api::ToJson(im.source)}}}};
    } else {
      Wait wait;
      auto resolved = ResolveStepJob(
          SpecOf(i).job,
          [&](const std::string& step, RefKind kind) { return Artifact(step, kind, &wait); },
          "steps[" + std::to_string(i) + "].job");
      if (!resolved.ok()) {
        if (!wait.reason.empty() && !wait.give_up) {
          s.reason = wait.reason;
          return false;
        }
        Finish(s, kStepFailed, resolved.status().message(), now_);
        return true;
      }
      body = std::move(*resolved);
    }
    s.submitting = body;
    s.reason = "submitting attempt " + std::to_string(attempt + 1);
    submissions_.push_back({p_.id, i, attempt, StepJobKey(p_, s.name, attempt), std::move(body)});
    return true;
  }

  void Started(PipelineStepState& s, int64_t job_id) {
    s.jobs.push_back(job_id);
    s.submitting = nullptr;
    s.state = kStepRunning;
    s.reason = "job " + std::to_string(job_id) + " submitted";
    if (!s.started_ms) s.started_ms = now_;
  }

  Result<bool> Running(PipelineStepState& s, const PipelineStepSpec& spec) {
    if (s.jobs.empty()) return common::Internal("pipeline step running without a job");
    const int64_t id = s.jobs.back();
    EMBODY_ASSIGN_OR_RETURN(job, jobs_.Get(id));
    if (!job) {
      Finish(s, kStepFailed, "job " + std::to_string(id) + " is gone", now_);
      return true;
    }
    if (!api::IsTerminal(job->state)) return false;
    const std::string what = "job " + std::to_string(id) + " " + api::JobStateName(job->state) +
                             (job->reason.empty() ? "" : ": " + job->reason);
    if (job->state == JobState::kSucceeded) {
      Finish(s, kStepSucceeded, what, now_);
    } else if (job->state == JobState::kFailed &&
               static_cast<int>(s.jobs.size()) <= spec.retries) {
      s.state = kStepPending;  // the next attempt, as soon as the loop comes back to it
      s.reason = what + "; retrying (attempt " + std::to_string(s.jobs.size() + 1) + " of " +
                 std::to_string(spec.retries + 1) + ")";
    } else {
      Finish(s, kStepFailed, what, now_);
    }
    return true;
  }

  // The latest job of a succeeded step (references point only to steps this one needs).
  Result<JobRecord> SourceJob(const std::string& step) {
    const PipelineStepState& src = p_.steps[spec_.Find(step)];
    if (src.jobs.empty()) return common::Internal("step " + step + " succeeded without a job");
    EMBODY_ASSIGN_OR_RETURN(job, jobs_.Get(src.jobs.back()));
    if (!job) return common::NotFound("job " + std::to_string(src.jobs.back()) + " not found");
    return *job;
  }

  // Waits (with a reason in `wait`) while a checkpoint is still uploading, within the limit.
  Result<json> Artifact(const std::string& step, RefKind kind, Wait* wait) {
    const PipelineStepState& src = p_.steps[spec_.Find(step)];
    if (kind == RefKind::kDataset) {
      EMBODY_ASSIGN_OR_RETURN(d, uow_.datasets().Get(src.dataset_id, p_.tenant_id, false));
      if (!d || d->state != kDatasetReady) {
        return common::FailedPrecondition("the dataset step " + step + " imported is not ready");
      }
      return json("dataset:" + d->name + "@" + std::to_string(d->version));
    }
    EMBODY_ASSIGN_OR_RETURN(job, SourceJob(step));
    EMBODY_ASSIGN_OR_RETURN(latest, uow_.checkpoints().LatestReady(job.id));
    if (latest && latest->tenant_id == p_.tenant_id) return json(latest->id);
    wait->reason = "waiting for a ready checkpoint of job " + std::to_string(job.id) +
                   " (step " + step + ")";
    wait->give_up = now_ - job.finished_ms.value_or(now_) > options_.artifact_wait_ms;
    return common::FailedPrecondition("job " + std::to_string(job.id) + " of step " + step +
                                      " left no ready checkpoint");
  }

  // The metric of one side of a gate; nullopt while its results have not arrived (or never
  // will: `late`).
  Result<std::optional<double>> Metric(const MetricRef& m, bool* late, int64_t* job_id) {
    EMBODY_ASSIGN_OR_RETURN(job, SourceJob(m.step));
    *job_id = job.id;
    EMBODY_ASSIGN_OR_RETURN(rows, uow_.events().Evaluations(job.id));
    std::optional<double> v = MetricOf(rows, m.metric, m.task);
    if (!v && now_ - job.finished_ms.value_or(now_) > options_.result_wait_ms) *late = true;
    return v;
  }

  // Judges the gate into s.gate (and gate_failed when it does not hold); false while waiting.
  Result<bool> Judge(PipelineStepState& s, const Gate& g) {
    bool late = false;
    int64_t value_job = 0, ref_job = 0;
    EMBODY_ASSIGN_OR_RETURN(value, Metric(g.value, &late, &value_job));
    json gate = {{"step", g.value.step}, {"metric", g.value.metric}, {"job_id", value_job}};
    if (!g.value.task.empty()) gate["task"] = g.value.task;
    std::optional<double> threshold = g.at_least;
    if (g.reference) {
      EMBODY_ASSIGN_OR_RETURN(ref, Metric(*g.reference, &late, &ref_job));
      json r = {{"step", g.reference->step}, {"metric", g.reference->metric}, {"job_id", ref_job},
                {"value", ref ? json(*ref) : json(nullptr)}};
      if (!g.reference->task.empty()) r["task"] = g.reference->task;
      gate["reference"] = std::move(r);
      gate["minus"] = g.minus;
      threshold = ref ? std::optional<double>(*ref - g.minus) : std::nullopt;
    }
    gate["value"] = value ? json(*value) : json(nullptr);
    gate["threshold"] = threshold ? json(*threshold) : json(nullptr);
    if (!value || !threshold) {
      if (!late) {
        s.reason = "waiting for evaluation results";
        return false;
      }
      gate["passed"] = false;
      s.gate = std::move(gate);
      Finish(s, kStepGateFailed, "no evaluation results for the gate", now_);
      return true;
    }
    const bool passed = *value >= *threshold;
    gate["passed"] = passed;
    s.gate = std::move(gate);
    if (!passed) {
      char text[160];
      std::snprintf(text, sizeof text, "%s %s %.4f is below the threshold %.4f",
                    g.value.step.c_str(), g.value.metric.c_str(), *value, *threshold);
      Finish(s, kStepGateFailed, text, now_);
    }
    return true;
  }

  Status Cancel() {
    bool live = false;
    const std::string actor = p_.tenant + "/pipeline-" + std::to_string(p_.id);
    for (PipelineStepState& s : p_.steps) {
      if (!s.submitting.is_null()) {
        // A submission that may have committed: its job, if there is one, is cancelled too.
        EMBODY_ASSIGN_OR_RETURN(found, Submitted(s));
        if (found) s.jobs.push_back(found->id);
        s.submitting = nullptr;
      }
      if (!IsFinalStepState(s.state)) Finish(s, kStepCancelled, "pipeline cancelled", now_);
      if (s.jobs.empty()) continue;
      EMBODY_ASSIGN_OR_RETURN(job, jobs_.Get(s.jobs.back()));
      if (!job || api::IsTerminal(job->state)) continue;
      if (job->state != JobState::kCancelling) {
        JobRecord j = *job;
        EMBODY_RETURN_IF_ERROR(RequestCancel(uow_, j, actor, now_));
        jobs_.Forget(j.id);
        if (api::IsTerminal(j.state)) continue;
      }
      live = true;
    }
    if (!live) {
      p_.state = kPipelineCancelled;
      p_.finished_ms = now_;
    }
    return Status::Ok();
  }

  UnitOfWork& uow_;
  PipelineRecord& p_;
  const PipelineSpec& spec_;
  const PipelineDriverOptions& options_;
  const int64_t now_;
  JobCache jobs_;
  std::vector<StepSubmission> submissions_;
};

}  // namespace

std::string StepJobKey(const PipelineRecord& p, const std::string& step, int attempt) {
  return "pipeline:" + p.key + ":" + step + ":" + std::to_string(attempt);
}

std::optional<double> MetricOf(const std::vector<EvaluationRecord>& rows, const std::string& metric,
                               const std::string& task) {
  double weighted = 0, episodes = 0, successes = 0;
  bool any = false;
  for (const EvaluationRecord& r : rows) {
    if (!task.empty() && r.task != task) continue;
    if (r.episodes <= 0) continue;
    any = true;
    episodes += r.episodes;
    successes += r.successes;
    weighted += r.episodes * (metric == "mean_return" ? r.mean_return : r.mean_length);
  }
  if (!any) return std::nullopt;
  if (metric == "success_rate") return successes / episodes;
  return weighted / episodes;
}

Result<std::vector<StepSubmission>> AdvancePipeline(UnitOfWork& uow, PipelineRecord& p,
                                                    const PipelineSpec& spec,
                                                    const PipelineDriverOptions& options,
                                                    int64_t now_ms) {
  if (p.steps.size() != spec.steps.size()) {
    return common::Internal("pipeline " + std::to_string(p.id) + ": steps do not match its spec");
  }
  return Advancer(uow, p, spec, options, now_ms).Run();
}

}  // namespace controlplane::service
