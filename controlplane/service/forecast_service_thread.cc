// The forecast service's own thread and what it keeps (forecast_service.h): the scheduler's
// latest snapshot and the forward run kept of it for dry runs (made while dry runs are asked,
// paced by plan_rebuild_gap_factor), the forecasts of newly pending jobs recorded from the
// snapshot their cycle decided on, and those forecasts judged against what the jobs then did,
// which teaches the run-time history.
#include "controlplane/service/forecast_service.h"

#include <algorithm>
#include <chrono>
#include <unordered_map>
#include <utility>

#include "common/log.h"
#include "controlplane/service/forecast_service_internal.h"

namespace controlplane::service {

using api::JobState;
using forecast_service_internal::EndAfter;
using nlohmann::json;

namespace {

// Forward plans of the scheduler's snapshots are made for this long after a dry run.
constexpr int64_t kPlanWhileAskedMs = 30'000;

}  // namespace

void ForecastService::ForgetSnapshot() {
  std::lock_guard<std::mutex> lock(latest_mu_);
  latest_.reset();
  forward_.reset();
}

std::shared_ptr<const ForwardPlan> ForecastService::FreshPlan(int64_t now) {
  if (options_.snapshot_max_age_ms <= 0 || options_.plan_max_age_ms <= 0) return nullptr;
  dry_run_asked_ms_.store(now);
  std::shared_ptr<const ForwardPlan> plan;
  bool stale = false;
  {
    std::lock_guard<std::mutex> lock(latest_mu_);
    plan = forward_;
    stale = latest_ && (!plan || plan->snapshot().now_ms < latest_->snapshot.now_ms);
  }
  if (stale) {  // the thread plans the latest snapshot
    std::lock_guard<std::mutex> lock(mu_);
    plan_due_ = true;
    cv_.notify_one();
  }
  if (!plan || now - plan->snapshot().now_ms > options_.plan_max_age_ms ||
      plan->snapshot().now_ms > now) {
    return nullptr;
  }
  return plan;
}

void ForecastService::PlanLatest() {
  std::shared_ptr<const Frozen> latest;
  const auto started = std::chrono::steady_clock::now();
  const int64_t now = now_();
  {
    std::lock_guard<std::mutex> lock(latest_mu_);
    latest = latest_;
    if (!latest || (forward_ && forward_->snapshot().now_ms >= latest->snapshot.now_ms)) return;
    // Paced: the kept run answers meanwhile, while it is less than half its allowed age old
    // (by the clock, since a slow scheduling cycle leaves the latest snapshot old too).
    if (forward_ && started < next_plan_ &&
        now - forward_->snapshot().now_ms < options_.plan_max_age_ms / 2) {
      return;
    }
  }
  auto plan = std::make_shared<const ForwardPlan>(latest->snapshot, latest->times,
                                                  options_.forecast);
  const auto done = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(latest_mu_);
  next_plan_ = done + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                          (done - started) * std::max(options_.plan_rebuild_gap_factor, 0.0));
  if (latest_ == latest) forward_ = std::move(plan);  // not forgotten meanwhile
}

void ForecastService::OnNewPending(const ClusterSnapshot& snapshot,
                                   const std::vector<JobRecord>& jobs,
                                   std::vector<int64_t> new_ids) {
  const bool keep = options_.snapshot_max_age_ms > 0;
  if (new_ids.empty() && !keep) return;
  Work w{std::make_shared<const Frozen>(Frozen{snapshot, TimesOf(snapshot, jobs)}),
         std::move(new_ids)};
  if (keep) {
    std::lock_guard<std::mutex> lock(latest_mu_);
    latest_ = w.cluster;
  }
  // Plans are made while dry runs are being asked, for the latest snapshot.
  const bool plan = keep && options_.plan_max_age_ms > 0 &&
                    snapshot.now_ms - dry_run_asked_ms_.load() <= kPlanWhileAskedMs;
  if (w.ids.empty() && !plan) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!w.ids.empty()) queue_.push_back(std::move(w));
  plan_due_ = plan_due_ || plan;
  cv_.notify_one();
}

Status ForecastService::Flush() {
  std::deque<Work> work;
  bool plan = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    work.swap(queue_);
    plan = std::exchange(plan_due_, false);
  }
  Status first = Status::Ok();
  for (const Work& w : work) {
    Status st = Record(w);
    if (!st.ok()) {
      common::LogWarn("forecasts of submitted jobs not stored", {{"error", st.ToString()}});
      if (first.ok()) first = st;
    }
  }
  if (plan) PlanLatest();
  return first;
}

Status ForecastService::Record(const Work& w) {
  const ClusterSnapshot& snapshot = w.cluster->snapshot;
  const ForecastTimes& times = w.cluster->times;
  std::unordered_map<int64_t, const PendingJob*> pending;
  for (const PendingJob& p : snapshot.pending) pending[p.job_id] = &p;
  auto forecasts = ForecastStarts(snapshot, times, w.ids, options_.forecast);
  std::vector<ForecastRecord> rows;
  for (const auto& [id, f] : forecasts) {
    const PendingJob& p = *pending.at(id);
    RunTime run;
    auto planned = times.run_ms.find(id);
    if (planned != times.run_ms.end() &&
        (p.time_limit_seconds <= 0 || planned->second <= p.time_limit_seconds * 1000)) {
      run.seconds = static_cast<double>(planned->second) / 1000.0;
      run.source = times.learned.count(id) ? "history" : "planner";
    } else if (p.time_limit_seconds > 0) {
      run.seconds = static_cast<double>(p.time_limit_seconds);
      run.source = "time_limit";
    } else {
      run.reason = "no time limit and no prediction from the planner";
    }
    ForecastRecord r;
    r.job_id = id;
    r.made_ms = snapshot.now_ms;
    r.start_ms = f.start_ms;
    r.run_seconds = run.seconds;
    r.end_ms = EndAfter(f.start_ms, run);
    r.detail = api::v1::ToJson(Describe(f, run, snapshot.now_ms, snapshot));
    // For Judge: what the job's run, once it succeeded, teaches the history.
    r.detail["time_limit_seconds"] = p.time_limit_seconds;
    rows.push_back(std::move(r));
  }
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_RETURN_IF_ERROR(uow->forecasts().Put(rows));
  return uow->Commit();
}

Result<std::vector<std::pair<std::string, double>>> ForecastService::Judge(int limit) {
  std::vector<std::pair<std::string, double>> errors;
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(due, uow->forecasts().Due(limit));
  if (due.empty()) return errors;
  std::vector<ForecastRecord> judged;
  for (ForecastOutcome& o : due) {
    ForecastRecord& f = o.forecast;
    if (o.started_ms && f.start_ms && !f.start_error_seconds) {
      f.start_error_seconds = static_cast<double>(*o.started_ms - *f.start_ms) / 1000.0;
      errors.push_back({"start", *f.start_error_seconds});
    }
    if (api::IsTerminal(o.state)) {
      f.open = false;
      // Only a run that finished says how long the job runs; a failure or a cancel does not.
      if (o.state == JobState::kSucceeded && o.started_ms && o.finished_ms && f.end_ms) {
        f.end_error_seconds = static_cast<double>(*o.finished_ms - *f.end_ms) / 1000.0;
        errors.push_back({"end", *f.end_error_seconds});
      }
      if (o.state == JobState::kSucceeded && o.started_ms && o.finished_ms) {
        const json limit = f.detail.value("time_limit_seconds", json(nullptr));
        if (limit.is_number()) {
          history_.Add(static_cast<double>(*o.finished_ms - *o.started_ms) / 1000.0,
                       limit.get<double>());
        }
      }
    }
    judged.push_back(f);
  }
  EMBODY_RETURN_IF_ERROR(uow->forecasts().Judge(judged));
  EMBODY_RETURN_IF_ERROR(uow->Commit());
  if (options_.observe_error) {
    for (const auto& [what, seconds] : errors) options_.observe_error(what, seconds);
  }
  return errors;
}

void ForecastService::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { Loop(); });
}

void ForecastService::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ForecastService::Loop() {
  const auto period = std::chrono::milliseconds(std::max(options_.judge_period_ms, 10));
  auto next_judge = std::chrono::steady_clock::now() + period;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_until(lock, next_judge, [&] { return stop_ || !queue_.empty() || plan_due_; });
    if (stop_) break;
    lock.unlock();
    (void)Flush();  // logged there
    if (std::chrono::steady_clock::now() >= next_judge) {
      auto judged = Judge();
      if (!judged.ok()) {
        common::LogWarn("forecasts not compared", {{"error", judged.status().ToString()}});
      }
      next_judge = std::chrono::steady_clock::now() + period;
    }
    lock.lock();
  }
}

}  // namespace controlplane::service
