// Forecasts as the API answers them (forecast_service.h): a dry run checked as a submission
// and forecast, a job's forecast, the stored forecast's view; and what every forecast is made
// from: run times (planner, history, time limit) and the cluster (the scheduler's kept
// snapshot, or the store read as the scheduler loop reads it). The service's thread, the kept
// forward run and the record of submitted jobs' forecasts are forecast_service_thread.cc.
#include "controlplane/service/forecast_service.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "common/time_util.h"
#include "controlplane/service/checkpoints_service.h"
#include "controlplane/service/dataset_lifecycle.h"
#include "controlplane/service/evaluations.h"
#include "controlplane/service/fair_share_store.h"
#include "controlplane/service/forecast_service_internal.h"
#include "controlplane/service/job_fit.h"
#include "controlplane/service/jobs_service.h"
#include "controlplane/service/scheduler_snapshot.h"
#include "controlplane/service/usage_accounting.h"

namespace controlplane::service {

using api::JobState;
using forecast_service_internal::EndAfter;
using nlohmann::json;

namespace {

// The id a dry run's job takes in the forward run: above every real one, so among jobs of its
// priority and tenant submitted in the same millisecond it goes last, as a new job would.
constexpr int64_t kDryRunId = std::numeric_limits<int64_t>::max();
constexpr size_t kMaxCachedRunTimes = 200'000;
// How long a gap in fair-share accrual is counted, as the scheduler loop's default.
constexpr int64_t kAccrueMaxGapMs = 60'000;

// A forecast run from a snapshot taken before `now`: nothing starts before now.
JobForecast Since(JobForecast f, int64_t now) {
  if (f.start_ms && *f.start_ms < now) f.start_ms = now;
  return f;
}

// Where the forecast's cluster came from, when it was taken, and the hand-over it assumed.
api::v1::ForecastCluster SourceOf(const char* from, int64_t as_of_ms, int64_t handover_ms) {
  return {as_of_ms, from, static_cast<double>(handover_ms) / 1000.0};
}

const char* SourceName(bool from_scheduler) {
  return from_scheduler ? "scheduler_snapshot" : "store";
}

}  // namespace

api::v1::StoredForecast StoredForecastOf(const ForecastRecord& f) {
  api::v1::StoredForecast out;
  out.made_ms = f.made_ms;
  out.start_ms = f.start_ms;
  out.run_seconds = f.run_seconds;
  out.end_ms = f.end_ms;
  out.start_error_seconds = f.start_error_seconds;
  out.end_error_seconds = f.end_error_seconds;
  return out;
}

json StoredForecastJson(const ForecastRecord& f) { return api::v1::ToJson(StoredForecastOf(f)); }

ForecastService::ForecastService(Database& db, api::SpecLimits limits,
                                 std::function<int64_t()> now, ForecastServiceOptions options,
                                 const PlanWatch* plan)
    : db_(db), limits_(limits), now_(std::move(now)), options_(std::move(options)), plan_(plan) {}

ForecastService::~ForecastService() { Stop(); }

RunTime ForecastService::PredictRun(const json& spec, const std::string& kind) const {
  RunTime run;
  const int64_t limit = TimeLimitSecondsOf(spec);
  std::optional<double> planned;
  if (kind == "train" && plan_) {
    const api::Resources r = ResourcesOf(spec);
    const int64_t steps = spec.value("engine", json::object())
                              .value("optim", json::object())
                              .value("steps", int64_t{0});
    const std::optional<double> step = plan_->Predict(spec, r.nodes * r.ranks_per_node);
    if (step && steps > 0) planned = *step * static_cast<double>(steps);
  }
  if (planned && (limit <= 0 || *planned <= static_cast<double>(limit))) {
    run.seconds = planned;
    run.source = "planner";
  } else if (auto learned = LearnedSeconds(limit)) {
    run.seconds = learned;
    run.source = "history";
  } else if (limit > 0) {
    run.seconds = static_cast<double>(limit);
    run.source = "time_limit";
  } else if (kind != "train") {
    run.reason = "no time limit, and the planner predicts train jobs only";
  } else if (!plan_) {
    run.reason = "no time limit, and the server has no cluster description (--plan-cluster)";
  } else {
    run.reason =
        "no time limit, and the planner cannot model this job (a dataset other than sim:reach "
        "names no sample length)";
  }
  return run;
}

std::optional<double> ForecastService::LearnedSeconds(int64_t limit_seconds) const {
  if (!options_.learn_run_times || limit_seconds <= 0) return std::nullopt;
  const std::optional<double> ratio = history_.Ratio();
  if (!ratio) return std::nullopt;
  return static_cast<double>(limit_seconds) * *ratio;
}

std::optional<double> ForecastService::CachedRunSeconds(const JobRecord& job) {
  if (job.kind != "train" || !plan_) return std::nullopt;
  {
    std::lock_guard<std::mutex> lock(cache_mu_);
    auto it = run_seconds_.find(job.id);
    if (it != run_seconds_.end()) return it->second;
  }
  RunTime run = PredictRun(job.spec, job.kind);
  std::optional<double> planned = run.source == "planner" ? run.seconds : std::nullopt;
  std::lock_guard<std::mutex> lock(cache_mu_);
  if (run_seconds_.size() >= kMaxCachedRunTimes) run_seconds_.clear();
  run_seconds_[job.id] = planned;
  return planned;
}

ForecastTimes ForecastService::TimesOf(const ClusterSnapshot& snapshot,
                                       const std::vector<JobRecord>& jobs) {
  ForecastTimes times;
  if (options_.learn_hand_over) {
    times.handover_ms = hand_over_.MeanMs().value_or(options_.hand_over_prior_ms);
  }
  const bool learning = LearnedSeconds(1).has_value();
  if (!plan_ && !learning) return times;  // time limits only: the forward run reads them off
  std::unordered_map<int64_t, const JobRecord*> by_id;
  if (plan_) {
    for (const JobRecord& j : jobs) by_id[j.id] = &j;
  }
  // The planner's run time, else the history's, else none (the forward run takes the limit).
  auto run_seconds = [&](int64_t id, int64_t limit_s, bool* learned) -> std::optional<double> {
    auto j = by_id.find(id);
    if (j != by_id.end()) {
      if (auto s = CachedRunSeconds(*j->second)) return s;
    }
    *learned = true;
    return LearnedSeconds(limit_s);
  };
  for (const PendingJob& p : snapshot.pending) {
    bool learned = false;
    if (auto s = run_seconds(p.job_id, p.time_limit_seconds, &learned)) {
      times.run_ms[p.job_id] = int64_t(*s * 1000.0);
      if (learned) times.learned.insert(p.job_id);
    }
  }
  for (const RunningJob& r : snapshot.running) {
    bool learned = false;
    if (auto s = run_seconds(r.job_id, r.time_limit_seconds, &learned)) {
      times.running_end_ms[r.job_id] = r.start_ms + int64_t(*s * 1000.0);
    }
  }
  return times;
}

Result<ClusterSnapshot> ForecastService::Look(UnitOfWork& uow, int64_t now,
                                              std::vector<JobRecord>* jobs) {
  EMBODY_ASSIGN_OR_RETURN(pending, uow.jobs().ListInStates({JobState::kPending}, false));
  EMBODY_ASSIGN_OR_RETURN(holders,
                          uow.jobs().ListInStates({JobState::kScheduled, JobState::kRunning,
                                                   JobState::kCancelling, JobState::kRestarting},
                                                  false));
  *jobs = std::move(pending);
  jobs->insert(jobs->end(), std::make_move_iterator(holders.begin()),
               std::make_move_iterator(holders.end()));
  EMBODY_ASSIGN_OR_RETURN(allocs, uow.allocations().All());
  EMBODY_ASSIGN_OR_RETURN(fair_share, uow.fair_share().Load());
  EMBODY_ASSIGN_OR_RETURN(nodes, uow.nodes().List());
  EMBODY_ASSIGN_OR_RETURN(tenants, uow.tenants().ListTenants(std::nullopt));
  const FairShareState fresh =
      Accrue(fair_share, HoldingsOf(*jobs, allocs), now,
             options_.forecast.schedule.fair_share_half_life_seconds, 0, kAccrueMaxGapMs)
          .state;
  return BuildSnapshot(now, nodes, allocs, *jobs, SchedTenantsOf(tenants, fresh.usage));
}

Result<ForecastService::Cluster> ForecastService::ClusterNow(std::unique_ptr<UnitOfWork> uow,
                                                             int64_t now) {
  std::shared_ptr<const Frozen> latest;
  if (options_.snapshot_max_age_ms > 0) {
    std::lock_guard<std::mutex> lock(latest_mu_);
    latest = latest_;
  }
  Cluster c;
  if (latest && now - latest->snapshot.now_ms <= options_.snapshot_max_age_ms &&
      latest->snapshot.now_ms <= now) {
    uow.reset();
    c.snapshot = latest->snapshot;
    c.times = latest->times;
    c.from_scheduler = true;
    return c;
  }
  std::vector<JobRecord> jobs;
  EMBODY_ASSIGN_OR_RETURN(snapshot, Look(*uow, now, &jobs));
  uow.reset();  // the reads are done; the forward run holds nothing
  c.times = TimesOf(snapshot, jobs);
  c.snapshot = std::move(snapshot);
  return c;
}

api::v1::Forecast ForecastService::Describe(const JobForecast& f, const RunTime& run, int64_t now,
                                            const ClusterSnapshot& s) const {
  api::v1::ForecastStart start;
  start.starts_now = f.starts_now;
  start.start_ms = f.start_ms;
  start.jobs_ahead = f.jobs_ahead;
  if (f.start_ms) {
    start.wait_seconds = static_cast<double>(*f.start_ms - now) / 1000.0;
    api::v1::ForecastPlacement placement{f.slot_type, {}};
    for (const NodeShare& n : f.nodes) {
      std::string name;
      for (const SchedNode& sn : s.nodes) {
        if (sn.id == n.node_id) name = sn.name;
      }
      placement.nodes.push_back({n.node_id, std::move(name), n.ranks, n.slots});
    }
    start.placement = std::move(placement);
  }
  api::v1::Forecast out;
  out.made_ms = now;
  out.run_seconds = run.seconds;
  if (!run.source.empty()) out.run_time_source = run.source;
  out.end_ms = EndAfter(f.start_ms, run);
  out.reasons = f.waits;
  if (!f.start_ms && !f.unknown_reason.empty()) out.reasons.push_back(f.unknown_reason);
  if (!run.seconds) out.reasons.push_back("run time unknown: " + run.reason);
  out.start = std::move(start);
  return out;
}

Result<api::v1::Forecast> ForecastService::DryRun(const Principal& p, const std::string& body) {
  // Every check of JobsService::Submit and of its batch (submit_batcher.cc), in the same order,
  // so a dry run is refused exactly when and as the submission would be.
  EMBODY_RETURN_IF_ERROR(RequireWriter(p));
  EMBODY_ASSIGN_OR_RETURN(spec, api::ParseJobSpecText(body, limits_));
  if (spec.kind == api::JobKind::kImport) {
    return Status(common::Code::kUnprocessable, "import jobs are started by POST /v1/datasets",
                  "kind");
  }
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());  // read only: never committed
  EMBODY_ASSIGN_OR_RETURN(tenant, uow->tenants().GetTenant(p.tenant_id, false));
  if (!tenant) return common::NotFound("tenant " + std::to_string(p.tenant_id) + " not found");
  int64_t pending_now = 0;
  if (tenant->quota.pending_jobs) {
    EMBODY_ASSIGN_OR_RETURN(n, uow->jobs().PendingCount(p.tenant_id));
    pending_now = n;
  }
  EMBODY_RETURN_IF_ERROR(CheckPriority(p, *tenant, spec.priority, options_.default_max_priority));
  EMBODY_ASSIGN_OR_RETURN(shapes, uow->nodes().Shapes());
  EMBODY_RETURN_IF_ERROR(CheckAdmission(*tenant, pending_now, NodeSizes(shapes), spec.resources));
  EMBODY_RETURN_IF_ERROR(ResolveEvalCheckpoint(*uow, p.tenant_id, &spec));
  if (spec.init_from > 0) EMBODY_RETURN_IF_ERROR(CheckInitFrom(*uow, p.tenant_id, spec.init_from));
  EMBODY_ASSIGN_OR_RETURN(dataset, ResolveDataset(*uow, p.tenant_id, spec));
  (void)dataset;
  EMBODY_ASSIGN_OR_RETURN(reads, ResolveCommandDatasets(*uow, p.tenant_id, spec));
  (void)reads;
  uow.reset();
  return Predict(p.tenant_id, spec);
}

Result<api::v1::Forecast> ForecastService::Predict(int64_t tenant_id, const api::JobSpec& spec) {
  const int64_t now = now_();
  const json stored_spec = api::ToJson(spec);
  const RunTime planned_run = PredictRun(stored_spec, api::JobKindName(spec.kind));
  const PendingJob job{kDryRunId, tenant_id, spec.priority, now, spec.resources,
                       spec.time_limit_seconds};
  if (std::shared_ptr<const ForwardPlan> plan = FreshPlan(now)) {
    std::optional<int64_t> run_ms;
    if (planned_run.seconds) run_ms = static_cast<int64_t>(*planned_run.seconds * 1000.0);
    api::v1::Forecast out =
        Describe(Since(plan->Forecast(job, run_ms), now), planned_run, now, plan->snapshot());
    out.cluster = SourceOf("scheduler_plan", plan->snapshot().now_ms, plan->times().handover_ms);
    out.dry_run = true;
    return out;
  }
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());  // read only: never committed
  EMBODY_ASSIGN_OR_RETURN(cluster, ClusterNow(std::move(uow), now));
  ClusterSnapshot& snapshot = cluster.snapshot;
  ForecastTimes& times = cluster.times;
  const RunTime& run = planned_run;
  if (run.seconds) times.run_ms[kDryRunId] = static_cast<int64_t>(*run.seconds * 1000.0);
  snapshot.pending.push_back(job);
  auto f = ForecastStarts(snapshot, times, {kDryRunId}, options_.forecast);
  api::v1::Forecast out = Describe(Since(f[kDryRunId], now), run, now, snapshot);
  out.cluster = SourceOf(SourceName(cluster.from_scheduler), snapshot.now_ms, times.handover_ms);
  out.dry_run = true;
  return out;
}

Result<api::v1::Forecast> ForecastService::ForJob(const Principal& p, int64_t id) {
  EMBODY_RETURN_IF_ERROR(RequireReader(p));
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(job, uow->jobs().Get(id, p.TenantScope(), false));
  if (!job) return common::NotFound("job " + std::to_string(id) + " not found");
  EMBODY_ASSIGN_OR_RETURN(stored, uow->forecasts().ForJobs({id}));
  std::optional<api::v1::StoredForecast> submitted;
  if (stored.count(id)) submitted = StoredForecastOf(stored.at(id));
  const RunTime run = PredictRun(job->spec, job->kind);
  const int64_t now = now_();
  api::v1::Forecast out;
  if (job->state == JobState::kPending) {
    EMBODY_ASSIGN_OR_RETURN(cluster, ClusterNow(std::move(uow), now));
    const bool seen = std::any_of(cluster.snapshot.pending.begin(), cluster.snapshot.pending.end(),
                                  [&](const PendingJob& q) { return q.job_id == id; });
    if (!seen) {  // pending since the scheduler's snapshot: read the cluster as it is now
      EMBODY_ASSIGN_OR_RETURN(again, db_.Begin());
      std::vector<JobRecord> jobs;
      EMBODY_ASSIGN_OR_RETURN(snapshot, Look(*again, now, &jobs));
      again.reset();
      cluster.times = TimesOf(snapshot, jobs);
      cluster.snapshot = std::move(snapshot);
      cluster.from_scheduler = false;
    }
    auto f = ForecastStarts(cluster.snapshot, cluster.times, {id}, options_.forecast);
    out = Describe(Since(f[id], now), run, now, cluster.snapshot);
    out.cluster = SourceOf(SourceName(cluster.from_scheduler), cluster.snapshot.now_ms,
                           cluster.times.handover_ms);
  } else if (api::IsTerminal(job->state)) {
    return common::FailedPrecondition(std::string("job is ") + api::JobStateName(job->state) +
                                      ": it has nothing left to forecast; its view shows how "
                                      "its submission's forecast came out");
  } else {
    // Holding slots: when it is expected to end.
    const int64_t start = job->started_ms.value_or(job->updated_ms);
    out.made_ms = now;
    out.started_ms = job->started_ms;
    out.run_seconds = run.seconds;
    if (!run.source.empty()) out.run_time_source = run.source;
    out.end_ms = EndAfter(start, run);
    if (!run.seconds) out.reasons.push_back("run time unknown: " + run.reason);
  }
  out.job = api::v1::ForecastJob{id, api::JobStateName(job->state), std::move(submitted)};
  return out;
}

}  // namespace controlplane::service
