#include "controlplane/service/evaluations.h"

#include <string>

#include "controlplane/service/checkpoint_index.h"

namespace controlplane::service {

namespace {

// FP8 evaluation quantises a behaviour-cloning checkpoint; an rl job's checkpoints are rl
// policies (trunk and heads), which have no FP8 path. Refused here, where the source job's kind
// is known, rather than by the engine after the job was scheduled (it checks too).
Status CheckFp8Source(const api::EvalOptions& ev, const JobRecord& source) {
  if (!ev.fp8 || source.kind != "rl") return Status::Ok();
  return common::InvalidArgument(
      "FP8 evaluation applies to behaviour-cloning checkpoints; job " +
          std::to_string(source.id) + " is kind rl, whose checkpoints are rl policies",
      "eval.fp8");
}

}  // namespace

Status ResolveEvalCheckpoint(UnitOfWork& uow, int64_t tenant_id, api::JobSpec* spec) {
  if (spec->kind != api::JobKind::kEval) return Status::Ok();
  if (spec->init_from != 0) {
    return common::InvalidArgument(
        "not allowed for kind \"eval\": name the checkpoint in eval.checkpoint or "
        "eval.checkpoint_from_job",
        "init_from");
  }
  const api::EvalOptions& ev = spec->eval;
  if (ev.checkpoint != 0) {
    EMBODY_ASSIGN_OR_RETURN(c, uow.checkpoints().Get(ev.checkpoint, false));
    if (!c || c->tenant_id != tenant_id || c->state != "ready") {
      return Status(common::Code::kNotFound,
                    "checkpoint " + std::to_string(ev.checkpoint) + " not found",
                    "eval.checkpoint");
    }
    if (ev.fp8) {
      EMBODY_ASSIGN_OR_RETURN(source, uow.jobs().Get(c->job_id, tenant_id, false));
      if (source) EMBODY_RETURN_IF_ERROR(CheckFp8Source(ev, *source));
    }
    spec->init_from = c->id;
    return Status::Ok();
  }
  EMBODY_ASSIGN_OR_RETURN(job, uow.jobs().Get(ev.checkpoint_from_job, tenant_id, false));
  if (!job) {
    return Status(common::Code::kNotFound,
                  "job " + std::to_string(ev.checkpoint_from_job) + " not found",
                  "eval.checkpoint_from_job");
  }
  EMBODY_RETURN_IF_ERROR(CheckFp8Source(ev, *job));
  EMBODY_ASSIGN_OR_RETURN(latest, uow.checkpoints().LatestReady(job->id));
  if (!latest || latest->tenant_id != tenant_id) {
    return Status(common::Code::kFailedPrecondition,
                  "job " + std::to_string(job->id) +
                      " has no ready checkpoint yet (GET /v1/jobs/" + std::to_string(job->id) +
                      "/checkpoints)",
                  "eval.checkpoint_from_job");
  }
  spec->init_from = latest->id;
  return Status::Ok();
}

Status RecordEvaluationEvent(UnitOfWork& uow, int64_t job_id, const nlohmann::json& d,
                             int64_t time_ms) {
  if (!d.is_object() || !d.contains("tasks") || !d["tasks"].is_array()) return Status::Ok();
  for (const nlohmann::json& t : d["tasks"]) {
    EvaluationRecord r;
    r.task = t.at("task").get<std::string>();
    r.episodes = t.at("episodes").get<int>();
    r.successes = t.at("successes").get<int>();
    r.success_rate = t.at("success_rate").get<double>();
    r.mean_return = t.at("mean_return").get<double>();
    r.mean_length = t.at("mean_length").get<double>();
    r.checkpoint_step = d.value("checkpoint_step", int64_t{0});
    r.policy = d.value("policy", std::string("bc")) == "rl" ? "rl" : "bc";  // nothing else exists
    r.fp8 = d.value("fp8", false);
    r.time_ms = time_ms;
    EMBODY_RETURN_IF_ERROR(uow.events().PutEvaluation(job_id, r));
  }
  return Status::Ok();
}

api::v1::Evaluation EvaluationView(int64_t job_id, const std::vector<EvaluationRecord>& rows) {
  api::v1::Evaluation out{job_id, {}};
  for (const EvaluationRecord& r : rows) {
    out.tasks.push_back({r.task, r.episodes, r.successes, r.success_rate, r.mean_return,
                         r.mean_length, r.checkpoint_step, r.policy, r.fp8, r.time_ms});
  }
  return out;
}

}  // namespace controlplane::service
