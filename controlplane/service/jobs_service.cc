#include "controlplane/service/evaluations.h"
#include "controlplane/service/jobs_service.h"

#include "controlplane/service/checkpoints_service.h"

#include <algorithm>

#include "common/crypto.h"
#include "common/parse_int.h"
#include "controlplane/service/audit_scope.h"
#include "controlplane/service/dataset_lifecycle.h"
#include "controlplane/service/forecast_service.h"
#include "controlplane/service/launch_phases.h"
#include "controlplane/service/pipeline_store.h"
#include "controlplane/service/roles.h"
#include "controlplane/service/submit_batcher.h"
#include "controlplane/service/transitions.h"

namespace controlplane::service {

using api::JobState;

namespace {
constexpr size_t kMaxIdempotencyKey = 200;
constexpr int kMaxListLimit = 1000;
constexpr int kMaxEventLimit = 1000;

Result<JobRecord> GetScoped(UnitOfWork& uow, const Principal& p, int64_t id, bool for_update) {
  EMBODY_ASSIGN_OR_RETURN(job, uow.jobs().Get(id, p.TenantScope(), for_update));
  if (!job) return common::NotFound("job " + std::to_string(id) + " not found");
  return std::move(*job);
}

// The pipeline step that submitted `job`, and which of its attempts it is.
Result<std::optional<nlohmann::json>> PipelineOf(UnitOfWork& uow, const JobRecord& job) {
  EMBODY_ASSIGN_OR_RETURN(p, uow.pipelines().GetByJob(job.tenant_id, job.id));
  if (!p) return std::optional<nlohmann::json>();
  for (const PipelineStepState& s : p->steps) {
    auto it = std::find(s.jobs.begin(), s.jobs.end(), job.id);
    if (it == s.jobs.end()) continue;
    return std::optional<nlohmann::json>(nlohmann::json{
        {"id", p->id}, {"name", p->name}, {"step", s.name}, {"attempt", it - s.jobs.begin() + 1}});
  }
  return std::optional<nlohmann::json>();
}

}  // namespace

JobRecord NewJobRecord(const NewJob& nj, int64_t id, const std::string& tenant_name) {
  JobRecord j;
  j.id = id;
  j.tenant_id = nj.tenant_id;
  j.token_id = nj.token_id;
  j.request_sha256 = nj.request_sha256;
  j.tenant = tenant_name;
  j.name = nj.name;
  j.kind = nj.kind;
  j.state = JobState::kPending;
  j.priority = nj.priority;
  j.spec = nj.spec;
  j.created_ms = nj.now_ms;
  j.updated_ms = nj.now_ms;
  return j;
}

NewJob NewJobOf(const Principal& p, const api::JobSpec& spec, const std::string& digest,
                const std::string& idempotency_key, int64_t now_ms) {
  NewJob nj;
  nj.tenant_id = p.tenant_id;
  nj.token_id = p.token_id;
  nj.request_sha256 = digest;
  nj.name = spec.name;
  nj.kind = api::JobKindName(spec.kind);
  nj.priority = spec.priority;
  nj.spec = api::ToJson(spec);
  nj.idempotency_key = idempotency_key;
  nj.now_ms = now_ms;
  return nj;
}

Result<JobRecord> ReplayOf(JobRecord existing, const std::string& digest) {
  if (existing.request_sha256 != digest) {
    return Status(common::Code::kAlreadyExists,
                  "Idempotency-Key already used for job " + std::to_string(existing.id) +
                      " with a different request body",
                  "Idempotency-Key");
  }
  return existing;
}

nlohmann::json SubmittedEvent(const Principal& p) {
  return {{"from", nullptr},
          {"to", "PENDING"},
          {"reason", "submitted"},
          {"actor", p.tenant + "/" + p.token_name}};
}

JobsService::JobsService(Database& db, api::SpecLimits limits, Clock now,
                         std::function<void()> wake, SubmitBatchOptions batch)
    : db_(db), limits_(limits), now_(std::move(now)), wake_(std::move(wake)) {
  batcher_ = std::make_unique<SubmitBatcher>(db_, std::move(batch), now_, wake_);
}

JobsService::~JobsService() = default;

SubmitBatchStats JobsService::batch_stats() const { return batcher_->stats(); }
JobsService::JobsService(JobsService&&) noexcept = default;

Status RequireWriter(const Principal& p) { return RequireAtLeast(p, kMember, "changing jobs"); }

Status RequireReader(const Principal& p) { return RequireAtLeast(p, kViewer, "reading jobs"); }

Status CheckPriority(const Principal& p, const TenantRecord& tenant, int priority,
                     int default_max) {
  if (p.IsClusterAdmin()) return Status::Ok();
  const int cap = tenant.quota.max_priority.value_or(default_max);
  if (priority <= cap) return Status::Ok();
  return Status(common::Code::kPermissionDenied,
                "priority " + std::to_string(priority) + " is above this tenant's " +
                    (tenant.quota.max_priority ? "quota.max_priority " : "default max priority ") +
                    std::to_string(cap),
                "priority");
}

Status CheckAdmission(const TenantRecord& tenant, int64_t pending_jobs, const NodeSizes& nodes,
                      const api::Resources& r) {
  if (auto no = WhyNeverFits(r, LimitsOf(tenant.quota), nodes)) {
    return Status(common::Code::kUnprocessable, no->reason, no->field);
  }
  if (tenant.quota.pending_jobs && pending_jobs >= *tenant.quota.pending_jobs) {
    return Status(common::Code::kResourceExhausted,
                  "tenant quota: pending jobs " + std::to_string(pending_jobs) + "/" +
                      std::to_string(*tenant.quota.pending_jobs),
                  "quota.pending_jobs");
  }
  return Status::Ok();
}

Result<SubmitResult> JobsService::Submit(const Principal& p, const std::string& body,
                                         const std::string& idempotency_key) {
  EMBODY_RETURN_IF_ERROR(RequireWriter(p));
  if (idempotency_key.size() > kMaxIdempotencyKey) {
    return common::InvalidArgument("Idempotency-Key longer than 200 characters",
                                   "Idempotency-Key");
  }
  // A structured-field string (RFC 8941): printable ASCII. Other bytes would reach the database
  // as text that is not UTF-8.
  for (unsigned char c : idempotency_key) {
    if (c < 0x20 || c > 0x7e) {
      return common::InvalidArgument("Idempotency-Key must be printable ASCII", "Idempotency-Key");
    }
  }
  EMBODY_ASSIGN_OR_RETURN(spec, api::ParseJobSpecText(body, limits_));
  if (spec.kind == api::JobKind::kImport) {
    // The import job writes into a dataset record the server made for it.
    return Status(common::Code::kUnprocessable,
                  "import jobs are started by POST /v1/datasets", "kind");
  }
  const std::string digest = idempotency_key.empty() ? "" : common::Sha256Hex(body);
  // Written with whatever else arrives now, in one transaction, or alone (submit_batcher.h).
  return batcher_->Submit(
      PreparedSubmit{p, std::move(spec), digest, idempotency_key, AuditScope::HandedOff()});
}

Result<JobView> JobsService::Get(const Principal& p, int64_t id) {
  EMBODY_RETURN_IF_ERROR(RequireReader(p));
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(job, GetScoped(*uow, p, id, false));
  EMBODY_ASSIGN_OR_RETURN(phases, LoadLaunchPhases(*uow, job));
  EMBODY_ASSIGN_OR_RETURN(view, LoadJobView(*uow, std::move(job)));
  if (phases) view.launch_phases = ToJson(*phases);
  EMBODY_ASSIGN_OR_RETURN(forecast, uow->forecasts().ForJobs({id}));
  if (auto f = forecast.find(id); f != forecast.end()) {
    view.forecast = StoredForecastJson(f->second);
  }
  EMBODY_ASSIGN_OR_RETURN(pipeline, PipelineOf(*uow, view.job));
  view.pipeline = std::move(pipeline);
  return view;
}

Result<JobPage> JobsService::List(const Principal& p, int limit, const std::string& cursor,
                                  const std::string& state, int64_t tenant_id,
                                  const std::string& name_contains) {
  EMBODY_RETURN_IF_ERROR(RequireReader(p));
  if (limit <= 0 || limit > kMaxListLimit) {
    return common::InvalidArgument("limit must be in 1..1000", "limit");
  }
  JobQuery q;
  q.tenant_id = p.TenantScope();
  if (tenant_id > 0) {
    // Only a cluster-admin chooses; anyone else asking for another tenant gets an empty page.
    q.tenant_id = p.IsClusterAdmin() || tenant_id == p.tenant_id ? tenant_id : -1;
  }
  if (name_contains.size() > 128) return common::InvalidArgument("at most 128 characters", "q");
  q.name_contains = name_contains;
  q.limit = limit + 1;  // one more tells whether another page exists
  if (!state.empty()) {
    q.state = api::ParseJobState(state);
    if (!q.state) return common::InvalidArgument("unknown state " + state, "state");
  }
  if (!cursor.empty()) {
    auto before = common::ParseInt64(cursor, 1);
    if (!before.ok()) return common::InvalidArgument("bad cursor", "cursor");
    q.before_id = *before;
  }
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(jobs, uow->jobs().List(q));
  JobPage page;
  if (static_cast<int>(jobs.size()) > limit) {
    jobs.resize(limit);
    page.next_cursor = std::to_string(jobs.back().id);
  }
  EMBODY_ASSIGN_OR_RETURN(views, LoadJobViews(*uow, std::move(jobs)));
  page.jobs = std::move(views);
  return page;
}

Status RequestCancel(UnitOfWork& uow, JobRecord& job, const std::string& actor, int64_t now) {
  switch (job.state) {
    case JobState::kPending:
      return Transition(uow, job, JobState::kCancelled, "cancelled", actor, now);
    case JobState::kScheduled:
    case JobState::kRunning:
    case JobState::kRestarting:  // preempted, its processes may still run: kill them as usual
      return Transition(uow, job, JobState::kCancelling, "cancel requested", actor, now);
    case JobState::kCancelling:
      return Status::Ok();  // cancelling twice is the same as once
    default:
      return common::FailedPrecondition(std::string("job is already ") +
                                        api::JobStateName(job.state));
  }
}

Result<JobView> JobsService::Cancel(const Principal& p, int64_t id) {
  EMBODY_RETURN_IF_ERROR(RequireWriter(p));
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(job, GetScoped(*uow, p, id, true));
  AuditScope::NoteTarget("job " + std::to_string(id), job.tenant_id);
  EMBODY_RETURN_IF_ERROR(RequestCancel(*uow, job, p.tenant + "/" + p.token_name, now_()));
  EMBODY_ASSIGN_OR_RETURN(view, LoadJobView(*uow, std::move(job)));
  EMBODY_RETURN_IF_ERROR(uow->Commit());
  return view;
}

Result<std::vector<EventRecord>> JobsService::Events(const Principal& p, int64_t id,
                                                     int64_t after_id, const std::string& type,
                                                     int limit) {
  EMBODY_RETURN_IF_ERROR(RequireReader(p));
  if (limit <= 0 || limit > kMaxEventLimit) {
    return common::InvalidArgument("limit must be in 1..1000", "limit");
  }
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(job, GetScoped(*uow, p, id, false));
  return uow->events().List(job.id, after_id, type, limit);
}

Result<LogSnapshot> JobsService::Logs(const Principal& p, int64_t id, std::optional<int> attempt) {
  EMBODY_RETURN_IF_ERROR(RequireReader(p));
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(job, GetScoped(*uow, p, id, false));
  if (attempt && (*attempt < 0 || *attempt > job.attempt)) {
    return common::InvalidArgument("attempt must be in 0.." + std::to_string(job.attempt) +
                                       " for this job",
                                   "attempt");
  }
  EMBODY_ASSIGN_OR_RETURN(all, uow->logs().ForJob(job.id));
  LogSnapshot snap;
  snap.terminal = api::IsTerminal(job.state);
  if (attempt) {
    snap.attempt = *attempt;
  } else {
    // The latest attempt that wrote anything: a restarted job shows the last words of the attempt
    // before until its new attempt writes its first.
    snap.attempt = all.empty() ? job.attempt : 0;
    for (const LogRecord& l : all) snap.attempt = std::max(snap.attempt, l.attempt);
  }
  for (LogRecord& l : all) {
    if (l.attempt == snap.attempt) snap.logs.push_back(std::move(l));
  }
  return snap;
}

Result<nlohmann::json> JobsService::Metrics(const Principal& p, int64_t id,
                                            const MetricsRequest& req) {
  EMBODY_RETURN_IF_ERROR(RequireReader(p));
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(job, GetScoped(*uow, p, id, false));
  EMBODY_ASSIGN_OR_RETURN(samples, uow->events().SampleSteps(job.id, req.query));
  return BuildSeries(req.names, samples);
}

Result<api::v1::Evaluation> JobsService::Evaluation(const Principal& p, int64_t id) {
  EMBODY_RETURN_IF_ERROR(RequireReader(p));
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(job, GetScoped(*uow, p, id, false));
  EMBODY_ASSIGN_OR_RETURN(rows, uow->events().Evaluations(job.id));
  return EvaluationView(job.id, rows);
}

}  // namespace controlplane::service
