// The pipeline driver's passes (pipelines_service.h): every active pipeline moved on under its
// row lock (pipeline_driver.h decides), then the submissions it asked for made as the
// pipeline's owner, a job step through JobsService::Submit and an import step as POST
// /v1/datasets queues one, and each outcome written back into its step; and the thread that
// runs a pass every period_ms or when woken. The API's calls are pipelines_service.cc.
#include "controlplane/service/pipelines_service.h"

#include <chrono>

#include "common/log.h"
#include "controlplane/service/datasets_service.h"

namespace controlplane::service {

using nlohmann::json;

namespace {

constexpr int kPipelinesPerPass = 1000;

// A refusal the next pass may not get: the database or a full pending-jobs quota.
bool Transient(const Status& st) {
  return st.code() == common::Code::kUnavailable ||
         st.code() == common::Code::kResourceExhausted;
}

}  // namespace

Result<Principal> PipelinesService::OwnerOf(UnitOfWork& uow, const PipelineRecord& p) {
  EMBODY_ASSIGN_OR_RETURN(token, uow.tenants().GetToken(p.token_id, p.tenant_id));
  if (!token) return common::FailedPrecondition("the pipeline's owner token is gone");
  if (token->revoked_ms) {
    return common::FailedPrecondition("the token that submitted the pipeline was revoked");
  }
  if (token->expires_ms && *token->expires_ms <= now_()) {
    return common::FailedPrecondition("the token that submitted the pipeline has expired");
  }
  Principal owner;
  owner.token_id = token->id;
  owner.token_name = token->name;
  owner.tenant_id = token->tenant_id;
  owner.tenant = p.tenant;
  owner.role = token->role;
  return owner;
}

Status PipelinesService::Drive() {
  std::vector<int64_t> ids;
  {
    EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
    EMBODY_ASSIGN_OR_RETURN(active, uow->pipelines().Active(kPipelinesPerPass));
    ids = std::move(active);
  }
  Status first = Status::Ok();
  for (int64_t id : ids) {
    Status st = DriveOne(id);
    if (!st.ok()) {
      common::LogWarn("pipeline pass failed",
                      {{"pipeline", std::to_string(id)}, {"error", st.ToString()}});
      if (first.ok()) first = st;
    }
  }
  return first;
}

Status PipelinesService::DriveOne(int64_t id) {
  std::vector<StepSubmission> submissions;
  {
    EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
    EMBODY_ASSIGN_OR_RETURN(rec, uow->pipelines().Get(id, std::nullopt, /*for_update=*/true));
    if (!rec) return Status::Ok();
    if (rec->state != kPipelineRunning && rec->state != kPipelineCancelling) return Status::Ok();
    EMBODY_ASSIGN_OR_RETURN(spec, ParsePipelineSpec(rec->spec, options_.limits));
    const std::string before = StepsToJson(rec->steps).dump() + rec->state;
    EMBODY_ASSIGN_OR_RETURN(todo, AdvancePipeline(*uow, *rec, spec, options_.driver, now_()));
    submissions = std::move(todo);
    if (StepsToJson(rec->steps).dump() + rec->state != before) {
      EMBODY_RETURN_IF_ERROR(uow->pipelines().Update(*rec, now_()));
      EMBODY_RETURN_IF_ERROR(uow->Commit());
      if (rec->state != kPipelineRunning && rec->state != kPipelineCancelling) {
        common::LogInfo("pipeline ended", {{"pipeline", std::to_string(id)},
                                           {"state", rec->state},
                                           {"reason", rec->reason}});
      }
    }
  }
  for (const StepSubmission& s : submissions) {
    EMBODY_RETURN_IF_ERROR(s.body.contains("import") ? SubmitImport(s) : SubmitStep(s));
  }
  return Status::Ok();
}

Status PipelinesService::SubmitStep(const StepSubmission& s) {
  Result<Principal> owner = common::Internal("unset");
  {
    EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
    EMBODY_ASSIGN_OR_RETURN(rec, uow->pipelines().Get(s.pipeline_id, std::nullopt, false));
    if (!rec) return Status::Ok();
    owner = OwnerOf(*uow, *rec);
  }
  if (!owner.ok()) return Record(s, 0, 0, owner.status());
  // Outside any unit of work: the job's own transaction (the batcher's) is its own.
  auto submitted = jobs_.Submit(*owner, s.body.dump(), s.key);
  if (!submitted.ok()) {
    if (Transient(submitted.status())) return Status::Ok();  // the next pass tries again
    return Record(s, 0, 0, submitted.status());
  }
  return Record(s, submitted->job.job.id, 0, Status::Ok());
}

Status PipelinesService::SubmitImport(const StepSubmission& s) {
  // One transaction: the dataset version, its import job and the step that made them, so the
  // import is queued once however often this runs.
  Status refused = Status::Ok();
  {
    EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
    EMBODY_ASSIGN_OR_RETURN(rec, uow->pipelines().Get(s.pipeline_id, std::nullopt, true));
    if (!rec || rec->state != kPipelineRunning) return Status::Ok();
    PipelineStepState& step = rec->steps[s.step];
    if (step.submitting.is_null() || static_cast<int>(step.jobs.size()) != s.attempt) {
      return Status::Ok();  // recorded meanwhile
    }
    auto owner = OwnerOf(*uow, *rec);
    if (!owner.ok()) {
      refused = owner.status();
    } else {
      const json& im = s.body["import"];
      EMBODY_ASSIGN_OR_RETURN(source, api::ParseImportSource(im["source"], "import.source"));
      EMBODY_ASSIGN_OR_RETURN(tenant, uow->tenants().GetTenant(rec->tenant_id, true));
      if (!tenant) return common::NotFound("tenant not found");
      DatasetRecord d;
      d.tenant_id = rec->tenant_id;
      d.tenant = rec->tenant;
      d.token_id = owner->token_id;
      d.name = im["name"].get<std::string>();
      d.source = api::ToJson(source);
      const int64_t now = now_();
      EMBODY_ASSIGN_OR_RETURN(inserted, uow->datasets().Insert(d, now));
      d = std::move(inserted);
      Status queued = QueueImportJob(*uow, *owner, d, source, options_.dataset_root, now);
      if (queued.ok()) {
        step.jobs.push_back(d.job_id.value_or(0));
        step.dataset_id = d.id;
        step.submitting = nullptr;
        step.state = kStepRunning;
        step.reason = "import job " + std::to_string(d.job_id.value_or(0)) + " queued";
        if (!step.started_ms) step.started_ms = now;
        EMBODY_RETURN_IF_ERROR(uow->pipelines().Update(*rec, now));
        EMBODY_RETURN_IF_ERROR(uow->Commit());
        if (wake_) wake_();
        return Status::Ok();
      }
      if (Transient(queued)) return Status::Ok();  // rolled back; the next pass tries again
      refused = queued;
    }
  }
  return Record(s, 0, 0, refused);
}

Status PipelinesService::Record(const StepSubmission& s, int64_t job_id, int64_t dataset_id,
                                const Status& refused) {
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(rec, uow->pipelines().Get(s.pipeline_id, std::nullopt, true));
  if (!rec) return Status::Ok();
  PipelineStepState& step = rec->steps[s.step];
  if (step.submitting.is_null() || static_cast<int>(step.jobs.size()) != s.attempt) {
    return Status::Ok();  // another pass recorded it (it found the job by its key)
  }
  const int64_t now = now_();
  if (!refused.ok()) {
    step.state = kStepFailed;
    step.reason = "submission refused: " + refused.message() +
                  (refused.field().empty() ? "" : " (field " + refused.field() + ")");
    step.submitting = nullptr;
    step.finished_ms = now;
  } else {
    step.jobs.push_back(job_id);
    if (dataset_id > 0) step.dataset_id = dataset_id;
    step.submitting = nullptr;
    step.state = kStepRunning;
    step.reason = "job " + std::to_string(job_id) + " submitted";
    if (!step.started_ms) step.started_ms = now;
    if (rec->state == kPipelineCancelling) {
      // Cancelled while this job was being submitted: it stops with the rest.
      EMBODY_ASSIGN_OR_RETURN(job, uow->jobs().Get(job_id, rec->tenant_id, true));
      if (job && !api::IsTerminal(job->state)) {
        EMBODY_RETURN_IF_ERROR(RequestCancel(*uow, *job, rec->tenant + "/pipeline-" +
                                                             std::to_string(rec->id),
                                             now));
      }
      step.state = kStepCancelled;
      step.reason = "pipeline cancelled";
      step.finished_ms = now;
    }
  }
  EMBODY_RETURN_IF_ERROR(uow->pipelines().Update(*rec, now));
  return uow->Commit();
}

void PipelinesService::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      cv_.wait_for(lock, std::chrono::milliseconds(options_.period_ms),
                   [this] { return stop_ || woken_; });
      if (stop_) break;
      woken_ = false;
      lock.unlock();
      Status st = Drive();
      (void)st;  // logged per pipeline
      lock.lock();
    }
  });
}

void PipelinesService::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PipelinesService::Wake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    woken_ = true;
  }
  cv_.notify_all();
}

}  // namespace controlplane::service
