// Pipelines as the API serves them (pipelines_service.h): a submission checked whole and
// stored, its dry run forecast step by step, the listing, one pipeline's view and its cancel.
// The driver's passes that move pipelines on and submit their steps are
// pipelines_service_drive.cc.
#include "controlplane/service/pipelines_service.h"

#include "common/crypto.h"
#include "common/log.h"
#include "common/parse_int.h"
#include "common/time_util.h"
#include "controlplane/service/audit_scope.h"
#include "controlplane/service/checkpoint_index.h"
#include "controlplane/service/checkpoints_service.h"
#include "controlplane/service/forecast_service.h"
#include "controlplane/service/job_fit.h"
#include "controlplane/service/roles.h"

namespace controlplane::service {

using nlohmann::json;

namespace {

constexpr int kMaxListLimit = 500;

// The ids a step's job names itself (not through steps) are the tenant's, as POST /v1/jobs
// requires: another tenant's is not found, like one that never existed. Whether a checkpoint is
// ready is judged when the step is submitted.
Status CheckOwnIds(UnitOfWork& uow, int64_t tenant, const json& job, const std::string& field) {
  if (job.contains("init_from") && job["init_from"].is_number_integer()) {
    Status st = CheckInitFrom(uow, tenant, job["init_from"].get<int64_t>());
    if (!st.ok()) return Status(st.code(), st.message(), field + ".init_from");
  }
  const json ev = job.value("eval", json::object());
  if (ev.contains("checkpoint_from_job") && ev["checkpoint_from_job"].is_number_integer()) {
    const int64_t id = ev["checkpoint_from_job"].get<int64_t>();
    EMBODY_ASSIGN_OR_RETURN(found, uow.jobs().Get(id, tenant, false));
    if (!found) {
      return Status(common::Code::kNotFound, "job " + std::to_string(id) + " not found",
                    field + ".eval.checkpoint_from_job");
    }
  }
  if (ev.contains("checkpoint") && ev["checkpoint"].is_number_integer()) {
    const int64_t id = ev["checkpoint"].get<int64_t>();
    EMBODY_ASSIGN_OR_RETURN(c, uow.checkpoints().Get(id, false));
    if (!c || c->tenant_id != tenant) {
      return Status(common::Code::kNotFound, "checkpoint " + std::to_string(id) + " not found",
                    field + ".eval.checkpoint");
    }
  }
  return Status::Ok();
}

Result<PipelineRecord> GetScoped(UnitOfWork& uow, const Principal& p, int64_t id, bool for_update) {
  EMBODY_ASSIGN_OR_RETURN(rec, uow.pipelines().Get(id, p.TenantScope(), for_update));
  if (!rec) return common::NotFound("pipeline " + std::to_string(id) + " not found");
  return std::move(*rec);
}

}  // namespace

api::v1::Pipeline PipelineOf(const PipelineRecord& p) {
  api::v1::Pipeline out;
  out.id = p.id;
  out.tenant_id = p.tenant_id;
  out.tenant = p.tenant;
  out.name = p.name;
  out.state = p.state;
  out.reason = p.reason;
  out.spec = p.spec;
  out.created_ms = p.created_ms;
  out.updated_ms = p.updated_ms;
  out.finished_ms = p.finished_ms;
  const json& spec_steps = p.spec.value("steps", json::array());
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const PipelineStepState& s = p.steps[i];
    const json spec = i < spec_steps.size() ? spec_steps[i] : json::object();
    api::v1::PipelineStep step;
    step.name = s.name;
    step.state = s.state;
    step.reason = s.reason;
    std::string kind;
    if (spec.contains("import")) kind = "import";
    if (spec.contains("job")) kind = spec["job"].value("kind", "");
    if (!kind.empty()) step.kind = kind;
    step.needs = spec.value("needs", std::vector<std::string>{});
    step.retries = spec.value("retries", 0);
    step.jobs = s.jobs;
    if (s.dataset_id > 0) step.dataset_id = s.dataset_id;
    step.gate = s.gate;
    step.started_ms = s.started_ms;
    step.finished_ms = s.finished_ms;
    out.steps.push_back(std::move(step));
  }
  return out;
}

PipelinesService::PipelinesService(Database& db, JobsService& jobs, PipelinesOptions options,
                                   Clock now, std::function<void()> wake)
    : db_(db), jobs_(jobs), options_(std::move(options)), now_(std::move(now)),
      wake_(std::move(wake)) {}

PipelinesService::~PipelinesService() { Stop(); }

Result<PipelinesService::Checked> PipelinesService::Check(const Principal& p,
                                                          const std::string& body,
                                                          UnitOfWork& uow) {
  EMBODY_RETURN_IF_ERROR(RequireAtLeast(p, kMember, "submitting pipelines"));
  EMBODY_ASSIGN_OR_RETURN(spec, ParsePipelineSpecText(body, options_.limits));
  // The checks POST /v1/jobs makes of the submitter for each step's job now; the rest (pending
  // quota, the artifacts themselves) when the step is submitted.
  Checked checked;
  EMBODY_ASSIGN_OR_RETURN(tenant, uow.tenants().GetTenant(p.tenant_id, false));
  if (!tenant) return common::NotFound("tenant " + std::to_string(p.tenant_id) + " not found");
  EMBODY_ASSIGN_OR_RETURN(shapes, uow.nodes().Shapes());
  const NodeSizes sizes(shapes);
  json stored = {{"name", spec.name}, {"steps", json::array()}};
  const json raw = json::parse(body);  // parsed once already: its gates are kept as written
  for (size_t i = 0; i < spec.steps.size(); ++i) {
    const PipelineStepSpec& step = spec.steps[i];
    const std::string field = "steps[" + std::to_string(i) + "]";
    if (step.import_step && options_.dataset_root.empty()) {
      return Status(common::Code::kFailedPrecondition,
                    "this server has no dataset root: start embody-server (and every "
                    "embody-agent) with --dataset-root DIR to import datasets",
                    field + ".import");
    }
    json out = {{"name", step.name}, {"needs", step.needs}, {"retries", step.retries}};
    if (!step.job.is_null()) {
      // The placeholders parse as the real values will (ParsePipelineSpec checked the same).
      auto job = ResolveStepJob(
          step.job,
          [](const std::string&, RefKind kind) -> Result<json> {
            return kind == RefKind::kDataset ? json("dataset:x") : json(1);
          },
          field + ".job");
      if (!job.ok()) return job.status();
      EMBODY_ASSIGN_OR_RETURN(parsed, api::ParseJobSpec(*job, options_.limits));
      checked.jobs.emplace(static_cast<int>(i), parsed);
      if (Status st = CheckPriority(p, *tenant, parsed.priority, options_.default_max_priority);
          !st.ok()) {
        return Status(st.code(), st.message(), field + ".job." + st.field());
      }
      if (auto no = WhyNeverFits(parsed.resources, LimitsOf(tenant->quota), sizes)) {
        return Status(common::Code::kUnprocessable, no->reason, field + ".job." + no->field);
      }
      EMBODY_RETURN_IF_ERROR(CheckOwnIds(uow, p.tenant_id, step.job, field + ".job"));
      out["job"] = step.job;
    }
    if (step.import_step) {
      out["import"] = {{"name", step.import_step->dataset_name},
                       {"source", api::ToJson(step.import_step->source)}};
    }
    if (step.when) out["when"] = raw["steps"][i]["when"];
    stored["steps"].push_back(std::move(out));
  }
  checked.spec = std::move(spec);
  checked.stored = std::move(stored);
  return checked;
}

Result<api::v1::Pipeline> PipelinesService::Submit(const Principal& p, const std::string& body) {
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(checked, Check(p, body, *uow));
  const PipelineSpec& spec = checked.spec;
  json& stored = checked.stored;
  PipelineRecord rec;
  rec.tenant_id = p.tenant_id;
  rec.tenant = p.tenant;
  rec.token_id = p.token_id;
  rec.name = spec.name;
  rec.spec = std::move(stored);
  for (const PipelineStepSpec& step : spec.steps) {
    PipelineStepState s;
    s.name = step.name;
    rec.steps.push_back(std::move(s));
  }
  rec.key = common::RandomToken().substr(0, 32);
  rec.created_ms = rec.updated_ms = now_();
  EMBODY_ASSIGN_OR_RETURN(id, uow->pipelines().Insert(rec));
  rec.id = id;
  AuditScope::NoteTarget("pipeline " + std::to_string(id), p.tenant_id);
  EMBODY_RETURN_IF_ERROR(uow->Commit());
  common::LogInfo("pipeline submitted", {{"pipeline", std::to_string(id)}, {"tenant", p.tenant}});
  Wake();
  return PipelineOf(rec);
}

Result<api::v1::PipelineDryRun> PipelinesService::DryRun(const Principal& p,
                                                         const std::string& body,
                                                         ForecastService& forecasts) {
  Checked checked;
  {
    EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());  // read only: never committed
    EMBODY_ASSIGN_OR_RETURN(c, Check(p, body, *uow));
    checked = std::move(c);
  }
  const PipelineSpec& spec = checked.spec;
  const int n = static_cast<int>(spec.steps.size());
  // Needs before the steps that name them (the spec has no cycle: ParsePipelineSpec).
  std::vector<int> order;
  std::vector<char> placed(n, 0);
  while (static_cast<int>(order.size()) < n) {
    const size_t before = order.size();
    for (int i = 0; i < n; ++i) {
      if (placed[i]) continue;
      bool ready = true;
      for (const std::string& need : spec.steps[i].needs) ready = ready && placed[spec.Find(need)];
      if (ready) {
        placed[i] = 1;
        order.push_back(i);
      }
    }
    if (order.size() == before) return common::Internal("pipeline steps form a cycle");
  }
  const int64_t now = now_();
  std::vector<std::optional<int64_t>> ends(n);
  api::v1::PipelineDryRun dry;
  dry.name = spec.name;
  dry.made_ms = now;
  dry.steps.resize(n);
  bool all_known = true;
  std::optional<int64_t> last_end = now;
  for (int i : order) {
    const PipelineStepSpec& step = spec.steps[i];
    api::v1::PipelineStepForecast& out = dry.steps[i];
    out.name = step.name;
    out.needs = step.needs;
    out.kind = step.job_kind.empty() ? "gate" : step.job_kind;
    std::optional<int64_t> ready = now, start, end;
    std::string unknown;
    for (const std::string& need : step.needs) {
      const std::optional<int64_t>& e = ends[spec.Find(need)];
      if (!e) {
        ready.reset();
        unknown = "after step " + need + ", whose end is not predicted";
        break;
      }
      ready = std::max(*ready, *e);
    }
    if (auto job = checked.jobs.find(i); job != checked.jobs.end()) {
      EMBODY_ASSIGN_OR_RETURN(f, forecasts.Predict(p.tenant_id, job->second));
      const std::optional<double> wait = f.start ? f.start->wait_seconds : std::nullopt;
      if (ready && wait) {
        start = *ready + static_cast<int64_t>(*wait * 1000.0);
      } else if (ready) {
        unknown = "its job's start is not predicted now";
      }
      if (start && f.run_seconds) {
        end = *start + static_cast<int64_t>(*f.run_seconds * 1000.0);
      } else if (start) {
        unknown = "its job's run time is not predicted";
      }
      out.forecast = std::move(f);
    } else if (step.import_step) {
      start = ready;
      if (ready) unknown = "an import's run time is not predicted";
    } else {
      start = end = ready;  // a gate alone: judged as soon as its needs have ended
    }
    ends[i] = end;
    if (end) {
      last_end = std::max(*last_end, *end);
    } else {
      all_known = false;
    }
    out.start_ms = start;
    out.end_ms = end;
    if (!unknown.empty()) out.not_predicted = unknown;
  }
  if (all_known) dry.end_ms = last_end;
  return dry;
}

Result<api::v1::PipelineList> PipelinesService::List(const Principal& p, int limit,
                                                     const std::string& cursor) {
  EMBODY_RETURN_IF_ERROR(RequireAtLeast(p, kViewer, "reading pipelines"));
  if (limit <= 0 || limit > kMaxListLimit) {
    return common::InvalidArgument("limit must be in 1..500", "limit");
  }
  PipelineQuery q;
  q.tenant_id = p.TenantScope();
  q.limit = limit + 1;  // one more tells whether another page exists
  if (!cursor.empty()) {
    auto before = common::ParseInt64(cursor, 1);
    if (!before.ok()) return common::InvalidArgument("bad cursor", "cursor");
    q.before_id = *before;
  }
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(rows, uow->pipelines().List(q));
  api::v1::PipelineList out;
  if (static_cast<int>(rows.size()) > limit) {
    rows.resize(limit);
    out.next_cursor = std::to_string(rows.back().id);
  }
  for (const PipelineRecord& r : rows) {
    api::v1::Pipeline view = PipelineOf(r);
    view.spec.reset();  // a list shows states; GET /v1/pipelines/{id} the spec
    out.pipelines.push_back(std::move(view));
  }
  return out;
}

Result<api::v1::Pipeline> PipelinesService::Get(const Principal& p, int64_t id) {
  EMBODY_RETURN_IF_ERROR(RequireAtLeast(p, kViewer, "reading pipelines"));
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(rec, GetScoped(*uow, p, id, false));
  return PipelineOf(rec);
}

Result<api::v1::Pipeline> PipelinesService::Cancel(const Principal& p, int64_t id) {
  EMBODY_RETURN_IF_ERROR(RequireAtLeast(p, kMember, "cancelling pipelines"));
  {
    EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
    EMBODY_ASSIGN_OR_RETURN(rec, GetScoped(*uow, p, id, true));
    AuditScope::NoteTarget("pipeline " + std::to_string(id), rec.tenant_id);
    if (rec.state != kPipelineRunning && rec.state != kPipelineCancelling) {
      return common::FailedPrecondition("pipeline is already " + rec.state);
    }
    if (rec.state == kPipelineRunning) {
      rec.state = kPipelineCancelling;
      rec.reason = "cancelled by " + p.tenant + "/" + p.token_name;
      EMBODY_RETURN_IF_ERROR(uow->pipelines().Update(rec, now_()));
      EMBODY_RETURN_IF_ERROR(uow->Commit());
    }
  }
  // The cascade now, not at the next pass: pending steps cancelled, running jobs asked to stop.
  EMBODY_RETURN_IF_ERROR(DriveOne(id));
  if (wake_) wake_();
  return Get(p, id);
}

}  // namespace controlplane::service
