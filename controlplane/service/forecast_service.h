// Forecasts as the API serves them (docs/contracts.md, "Forecasts"): POST /v1/jobs?dry_run=true
// (a submission checked exactly as a real one and forecast, nothing stored), GET
// /v1/jobs/{id}/forecast (a pending job's start, a running job's end), and the forecasts made
// for submitted jobs, stored (forecast_store.h) and compared with what the jobs then did.
//
// The start comes from the scheduler's decision run forward (forecast.h). Run times: for a
// train job on a server that has a cluster description (--plan-cluster), the planner's step
// time at the job's ranks times its steps, capped by its time limit; otherwise, once enough jobs
// have succeeded, the time limit times the mean share of their limits they ran for
// (run_time_history.h, source "history"); otherwise the time limit; otherwise none (and the job
// is not expected to end, as in the scheduler's own model). The history is this server's, in
// memory, fed by Judge; a restarted server forecasts with limits until it has learned again.
//
// Where the cluster comes from: with snapshot_max_age_ms set, a dry run (and a pending job's
// forecast) starts from the snapshot the scheduler loop decided on last, when it is at most that
// old, instead of reading every pending and running job again (the answer says `as_of` and
// `cluster_from`); what changed since (a submission, an end) is seen at the next cycle. Without
// it, or with an older snapshot, the jobs are read from the store. While dry runs are being asked
// (in the last 30 s), the service's thread also runs each latest snapshot's whole queue forward
// once (ForwardPlan, forecast.h), and a dry run is answered against that kept run when its
// snapshot is at most plan_max_age_ms old (the run of a long queue takes longer than a
// scheduling cycle): the forecast from that snapshot, without deciding again the cycles the new
// job cannot change. A dry run never waits for a run being kept: it is answered against the
// last one kept (or, when that is too old, read the plain way) while the next is made on the
// thread, and the thread paces those runs (plan_rebuild_gap_factor) so that with a queue of
// thousands they do not take a whole core from the requests and the scheduling cycle. Answers
// to the same job shape against one kept run are kept with it (ForwardPlan::Forecast).
//
// Hand-overs: the forward run adds the server's learned hand-over time (hand_over.h), fed by
// the node service's job ends and starts, per job handed slots at an expected end; before
// enough are learned, hand_over_prior_ms (a burst of submissions is forecast at first sight,
// before any job has ended).
//
// Submitted jobs are forecast when the scheduler first sees them pending (SchedulerLoop's
// forecast hook): from the very snapshot that cycle decides on, before its decision, so a job
// that starts at once was forecast to. Forward runs and their writes happen on this service's
// own thread (Start), so a long queue does not slow the scheduling cycle; without Start they
// wait for Flush (tests).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <limits>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/job_spec.h"
#include "api/v1/forecast.h"
#include "controlplane/service/forecast.h"
#include "controlplane/service/forecast_store.h"
#include "controlplane/service/hand_over.h"
#include "controlplane/service/plan_watch.h"
#include "controlplane/service/run_time_history.h"
#include "controlplane/service/store.h"

namespace controlplane::service {

struct ForecastServiceOptions {
  ForecastOptions forecast;        // the scheduler's options, and the forward run's bound
  int default_max_priority = 100;  // as the submission path's (SubmitBatchOptions)
  int judge_period_ms = 1000;      // how often the thread compares forecasts with their jobs
  bool learn_run_times = true;     // false: time limits as they are (run_time_history.h)
  bool learn_hand_over = true;     // false: slots pass to the next job at once (hand_over.h)
  // The hand-over until enough have been seen: a hand-over waits for at least the launch's
  // heartbeat, so the server sets its heartbeat interval; 0: none.
  int64_t hand_over_prior_ms = 0;
  // A dry run's cluster from the scheduler's latest snapshot when it is at most this old; 0:
  // always read from the store.
  int64_t snapshot_max_age_ms = 0;
  // With snapshots kept, while dry runs are asked: a dry run is answered against the kept
  // forward run of a snapshot at most this old (ForwardPlan); 0: never.
  int64_t plan_max_age_ms = 0;
  // Keeping the run is paced so that it takes at most about 1 / (1 + this) of a core: after a
  // run that took T, the next starts no sooner than T × this later, unless the kept run's
  // snapshot is by then plan_max_age_ms / 2 old. 0: every snapshot as it comes.
  double plan_rebuild_gap_factor = 3.0;
  // Called with each forecast error found ("start" or "end", actual minus predicted seconds).
  std::function<void(const std::string&, double)> observe_error;
};

// A job's expected run time and where it comes from.
struct RunTime {
  std::optional<double> seconds;
  std::string source;  // "planner" | "history" | "time_limit" | "" (none)
  std::string reason;  // why there is none
};

class ForecastService {
 public:
  // `plan`: the server's planner on its cluster description; null: run times from time limits.
  ForecastService(Database& db, api::SpecLimits limits, std::function<int64_t()> now,
                  ForecastServiceOptions options, const PlanWatch* plan = nullptr);
  ~ForecastService();

  // The answer to POST /v1/jobs?dry_run=true: refused exactly as a submission would be (same
  // status, message and field), or the forecast. Writes nothing.
  Result<api::v1::Forecast> DryRun(const Principal& p, const std::string& body);
  // The forecast part of a dry run for a job of `tenant_id` whose checks were made by the caller
  // (a pipeline's dry run, for each step's job as if it were submitted now). Writes nothing.
  Result<api::v1::Forecast> Predict(int64_t tenant_id, const api::JobSpec& spec);
  // GET /v1/jobs/{id}/forecast: a pending job's forecast now, a job holding slots its expected
  // end; failed_precondition for a job that has ended. Another tenant's job is not found.
  Result<api::v1::Forecast> ForJob(const Principal& p, int64_t id);

  // The scheduler loop's forecast hook, called every cycle with pending jobs: `new_ids` pending
  // in `snapshot` (built from `jobs`) are forecast and stored (a job's first forecast is kept),
  // and the snapshot is kept for dry runs (snapshot_max_age_ms).
  void OnNewPending(const ClusterSnapshot& snapshot, const std::vector<JobRecord>& jobs,
                    std::vector<int64_t> new_ids);
  // The scheduler loop found no pending job: dry runs read the store again until the next
  // OnNewPending, instead of a kept snapshot whose queue has gone.
  void ForgetSnapshot();
  // Records what OnNewPending queued, and plans the latest snapshot when dry runs want it, on
  // the caller's thread (the thread does it without this; it must not be called inside a unit
  // of work). The first error, once all were tried.
  Status Flush();
  // Compares stored forecasts with their jobs' starts and ends; returns the errors found.
  Result<std::vector<std::pair<std::string, double>>> Judge(int limit = 500);

  // The thread that runs forward runs for OnNewPending and judges every judge_period_ms.
  void Start();
  void Stop();

  RunTime PredictRun(const nlohmann::json& spec, const std::string& kind) const;
  // Told job ends and starts by the node service (NodeServiceHooks::hand_over).
  HandOverClock& hand_over() { return hand_over_; }
  // What a job of `limit_seconds` is expected to run for by the history; nullopt without a
  // limit, before enough jobs succeeded, or with learn_run_times off.
  std::optional<double> LearnedSeconds(int64_t limit_seconds) const;

 private:
  // One cycle's snapshot and times, shared by its queued forecasts and the kept latest.
  struct Frozen {
    ClusterSnapshot snapshot;
    ForecastTimes times;
  };
  struct Work {
    std::shared_ptr<const Frozen> cluster;
    std::vector<int64_t> ids;
  };
  struct Cluster {
    ClusterSnapshot snapshot;
    ForecastTimes times;
    bool from_scheduler = false;
  };
  // The cluster a forecast at `now` starts from: the scheduler's latest snapshot when fresh
  // enough, else read in `uow` (which is released either way).
  Result<Cluster> ClusterNow(std::unique_ptr<UnitOfWork> uow, int64_t now);
  // Expected ends and run times of the jobs of `snapshot` (planner predictions cached per job).
  ForecastTimes TimesOf(const ClusterSnapshot& snapshot, const std::vector<JobRecord>& jobs);
  std::optional<double> CachedRunSeconds(const JobRecord& job);
  // The cluster now, as the scheduler loop would read it.
  Result<ClusterSnapshot> Look(UnitOfWork& uow, int64_t now, std::vector<JobRecord>* jobs);
  Status Record(const Work& w);
  // The kept plan when its snapshot is at most snapshot_max_age_ms old, else null; notes the ask
  // and has the thread plan the latest snapshot when the plan is older.
  std::shared_ptr<const ForwardPlan> FreshPlan(int64_t now);
  // On the thread: plans the latest snapshot if it has no plan yet.
  void PlanLatest();
  // The start forecast `f` made at `now` on `s`, without where its cluster came from.
  api::v1::Forecast Describe(const JobForecast& f, const RunTime& run, int64_t now,
                             const ClusterSnapshot& s) const;
  void Loop();

  Database& db_;
  const api::SpecLimits limits_;
  std::function<int64_t()> now_;
  const ForecastServiceOptions options_;
  const PlanWatch* plan_;

  RunTimeHistory history_;
  HandOverClock hand_over_;

  std::mutex latest_mu_;
  std::shared_ptr<const Frozen> latest_;  // the scheduler's last snapshot and times
  std::shared_ptr<const ForwardPlan> forward_;  // of a recent snapshot (latest_ or older)
  std::atomic<int64_t> dry_run_asked_ms_{std::numeric_limits<int64_t>::min() / 2};
  // The next forward run is not started before this (plan_rebuild_gap_factor); under latest_mu_.
  std::chrono::steady_clock::time_point next_plan_{};

  std::mutex cache_mu_;
  std::unordered_map<int64_t, std::optional<double>> run_seconds_;  // planner's, by job id

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Work> queue_;
  bool plan_due_ = false;  // the thread is to plan the latest snapshot
  bool stop_ = false;
  std::thread thread_;
};

// The forecast stored for a submitted job, as the API shows it (a job's view, its forecast).
api::v1::StoredForecast StoredForecastOf(const ForecastRecord& f);
nlohmann::json StoredForecastJson(const ForecastRecord& f);  // ToJson(StoredForecastOf(f))

}  // namespace controlplane::service
