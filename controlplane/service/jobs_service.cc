#include "controlplane/service/jobs_service.h"

#include "controlplane/service/transitions.h"

namespace controlplane::service {

using api::JobState;

namespace {
constexpr size_t kMaxIdempotencyKey = 200;
constexpr int kMaxListLimit = 500;
constexpr int kMaxEventLimit = 1000;

Result<JobRecord> GetScoped(UnitOfWork& uow, const Principal& p, int64_t id, bool for_update) {
  EMBODY_ASSIGN_OR_RETURN(job, uow.jobs().Get(id, p.TenantScope(), for_update));
  if (!job) return common::NotFound("job " + std::to_string(id) + " not found");
  return std::move(*job);
}
}  // namespace

Status RequireWriter(const Principal& p) {
  if (p.role == "cluster-admin" || p.role == "tenant-admin" || p.role == "member") {
    return Status::Ok();
  }
  return Status(common::Code::kPermissionDenied, "role " + p.role + " may not change jobs");
}

Status RequireReader(const Principal& p) {
  if (p.role == "agent") return Status(common::Code::kPermissionDenied, "agents may not read jobs");
  return Status::Ok();
}

Result<SubmitResult> JobsService::Submit(const Principal& p, const std::string& body,
                                         const std::string& idempotency_key) {
  EMBODY_RETURN_IF_ERROR(RequireWriter(p));
  if (idempotency_key.size() > kMaxIdempotencyKey) {
    return common::InvalidArgument("Idempotency-Key longer than 200 characters",
                                   "Idempotency-Key");
  }
  EMBODY_ASSIGN_OR_RETURN(spec, api::ParseJobSpecText(body, limits_));
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  if (!idempotency_key.empty()) {
    EMBODY_ASSIGN_OR_RETURN(existing, uow->jobs().GetByIdempotencyKey(p.tenant_id, idempotency_key));
    if (existing) {
      EMBODY_ASSIGN_OR_RETURN(view, LoadJobView(*uow, std::move(*existing)));
      return SubmitResult{std::move(view), false};
    }
  }
  const int64_t now = now_();
  NewJob nj{p.tenant_id, spec.name, api::JobKindName(spec.kind), spec.priority,
            api::ToJson(spec), idempotency_key, now};
  auto id = uow->jobs().Insert(nj);
  if (!id.ok()) {
    // A concurrent request with the same key won the race: answer with its job.
    if (id.status().code() != common::Code::kAlreadyExists) return id.status();
    uow.reset();  // the failed insert aborted the transaction
    EMBODY_ASSIGN_OR_RETURN(again, db_.Begin());
    EMBODY_ASSIGN_OR_RETURN(winner, again->jobs().GetByIdempotencyKey(p.tenant_id, idempotency_key));
    if (!winner) return common::Unavailable("idempotency key conflict, retry");
    EMBODY_ASSIGN_OR_RETURN(view, LoadJobView(*again, std::move(*winner)));
    return SubmitResult{std::move(view), false};
  }
  EMBODY_ASSIGN_OR_RETURN(ev, uow->events().Append(*id, now, "state",
                                                   {{"from", nullptr},
                                                    {"to", "PENDING"},
                                                    {"reason", "submitted"},
                                                    {"actor", p.tenant + "/" + p.role}}));
  (void)ev;
  EMBODY_ASSIGN_OR_RETURN(job, GetScoped(*uow, p, *id, false));
  EMBODY_ASSIGN_OR_RETURN(view, LoadJobView(*uow, std::move(job)));
  EMBODY_RETURN_IF_ERROR(uow->Commit());
  if (wake_) wake_();
  return SubmitResult{std::move(view), true};
}

Result<JobView> JobsService::Get(const Principal& p, int64_t id) {
  EMBODY_RETURN_IF_ERROR(RequireReader(p));
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(job, GetScoped(*uow, p, id, false));
  return LoadJobView(*uow, std::move(job));
}

Result<JobPage> JobsService::List(const Principal& p, int limit, const std::string& cursor,
                                  const std::string& state) {
  EMBODY_RETURN_IF_ERROR(RequireReader(p));
  if (limit <= 0 || limit > kMaxListLimit) {
    return common::InvalidArgument("limit must be in 1..500", "limit");
  }
  JobQuery q;
  q.tenant_id = p.TenantScope();
  q.limit = limit + 1;  // one more tells whether another page exists
  if (!state.empty()) {
    q.state = api::ParseJobState(state);
    if (!q.state) return common::InvalidArgument("unknown state " + state, "state");
  }
  if (!cursor.empty()) {
    try {
      size_t used = 0;
      q.before_id = std::stoll(cursor, &used);
      if (used != cursor.size()) throw std::invalid_argument(cursor);
    } catch (const std::exception&) {
      return common::InvalidArgument("bad cursor", "cursor");
    }
  }
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(jobs, uow->jobs().List(q));
  JobPage page;
  if (static_cast<int>(jobs.size()) > limit) {
    jobs.resize(limit);
    page.next_cursor = std::to_string(jobs.back().id);
  }
  for (JobRecord& j : jobs) {
    EMBODY_ASSIGN_OR_RETURN(view, LoadJobView(*uow, std::move(j)));
    page.jobs.push_back(std::move(view));
  }
  return page;
}

Result<JobView> JobsService::Cancel(const Principal& p, int64_t id) {
  EMBODY_RETURN_IF_ERROR(RequireWriter(p));
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(job, GetScoped(*uow, p, id, true));
  const std::string actor = p.tenant + "/" + p.role;
  const int64_t now = now_();
  switch (job.state) {
    case JobState::kPending:
    case JobState::kRestarting:
      EMBODY_RETURN_IF_ERROR(Transition(*uow, job, JobState::kCancelled, "cancelled", actor, now));
      break;
    case JobState::kScheduled:
    case JobState::kRunning:
      EMBODY_RETURN_IF_ERROR(
          Transition(*uow, job, JobState::kCancelling, "cancel requested", actor, now));
      break;
    case JobState::kCancelling:
      break;  // cancelling twice is the same as once
    default:
      return common::FailedPrecondition(std::string("job is already ") +
                                        api::JobStateName(job.state));
  }
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

Result<LogSnapshot> JobsService::Logs(const Principal& p, int64_t id) {
  EMBODY_RETURN_IF_ERROR(RequireReader(p));
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(job, GetScoped(*uow, p, id, false));
  EMBODY_ASSIGN_OR_RETURN(logs, uow->logs().ForJob(job.id));
  return LogSnapshot{api::IsTerminal(job.state), std::move(logs)};
}

Result<nlohmann::json> JobsService::Metrics(const Principal& p, int64_t id,
                                            const MetricsRequest& req) {
  EMBODY_RETURN_IF_ERROR(RequireReader(p));
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(job, GetScoped(*uow, p, id, false));
  EMBODY_ASSIGN_OR_RETURN(samples, uow->events().SampleSteps(job.id, req.query));
  return BuildSeries(req.names, samples);
}

}  // namespace controlplane::service
