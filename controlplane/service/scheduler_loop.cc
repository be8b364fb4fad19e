#include "controlplane/service/scheduler_loop.h"

#include <algorithm>
#include <set>

#include "common/crypto.h"
#include "common/log.h"
#include "common/time_util.h"
#include "controlplane/service/fair_share_store.h"
#include "controlplane/service/leader_fence.h"
#include "controlplane/service/scheduler.h"
#include "controlplane/service/scheduler_snapshot.h"
#include "controlplane/service/time_limits.h"
#include "controlplane/service/transitions.h"
#include "controlplane/service/usage_accounting.h"

namespace controlplane::service {

using api::JobState;

Result<std::unique_ptr<UnitOfWork>> SchedulerLoop::BeginAsLeader() {
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  // First, so that a new leadership's advance waits for this unit rather than overlapping it.
  if (epoch_) EMBODY_RETURN_IF_ERROR(uow->leader().Hold(*epoch_));
  return uow;
}

Status SchedulerLoop::MarkLostNodes() {
  EMBODY_ASSIGN_OR_RETURN(uow, BeginAsLeader());
  const int64_t now = now_();
  EMBODY_ASSIGN_OR_RETURN(nodes, uow->nodes().List());
  for (NodeRecord& n : nodes) {
    int64_t heard = std::max(n.last_heartbeat_ms, judging_since_ms_);
    if (hooks_.heard) heard = std::max(heard, hooks_.heard->Last(n.id));
    if (n.state == "UP" && now - heard > 3LL * opts_.heartbeat_interval_ms) {
      EMBODY_RETURN_IF_ERROR(uow->nodes().SetState(n.id, "DOWN"));
      n.state = "DOWN";
      common::LogWarn("node down", {{"node", n.name}, {"node_id", std::to_string(n.id)}});
    }
    if (n.state != "DOWN") continue;
    EMBODY_ASSIGN_OR_RETURN(allocs, uow->allocations().ForNode(n.id));
    for (const AllocationRecord& a : allocs) {
      EMBODY_ASSIGN_OR_RETURN(job, uow->jobs().Get(a.job_id, std::nullopt, true));
      if (!job) continue;
      const std::string why = "node " + n.name + " lost";
      if (job->state == JobState::kCancelling) {
        EMBODY_RETURN_IF_ERROR(Transition(*uow, *job, JobState::kCancelled, why, "scheduler", now));
        continue;
      }
      if (job->state == JobState::kRestarting) {  // preempted: it was going back to the queue
        EMBODY_RETURN_IF_ERROR(Transition(*uow, *job, JobState::kPending,
                                          job->reason + ", requeued (" + why + ")", "scheduler",
                                          now));
        continue;
      }
      if (job->state != JobState::kScheduled && job->state != JobState::kRunning) continue;
      EMBODY_RETURN_IF_ERROR(Transition(*uow, *job, JobState::kRestarting, why, "scheduler", now));
      const int max_restarts = job->spec.value("max_restarts", 0);
      if (job->attempt < max_restarts) {
        job->attempt += 1;
        EMBODY_RETURN_IF_ERROR(Transition(*uow, *job, JobState::kPending,
                                          why + ", restart " + std::to_string(job->attempt),
                                          "scheduler", now));
      } else {
        EMBODY_RETURN_IF_ERROR(Transition(*uow, *job, JobState::kFailed, why, "scheduler", now));
      }
    }
  }
  return uow->Commit();
}

namespace {

// Asks a running job to make room for `for_job`. RESTARTING keeps its slots until its head agent
// reports it gone (the heartbeat sends the kill, the agent SIGTERMs it with a grace period);
// then it goes back to PENDING with its submit time and attempt, to resume from its latest
// checkpoint. A job that never launched goes back at once.
Status Preempt(UnitOfWork& uow, JobRecord& victim, int64_t for_job, const std::string& reason,
               int64_t now) {
  // Read again under its lock: it may have ended or been cancelled since the cycle read it.
  if (victim.state != JobState::kScheduled && victim.state != JobState::kRunning) {
    return Status::Ok();
  }
  const std::string why =
      "preempted by job " + std::to_string(for_job) + (reason.empty() ? "" : ": " + reason);
  EMBODY_ASSIGN_OR_RETURN(allocs, uow.allocations().ForJob(victim.id));
  const bool launched = std::any_of(allocs.begin(), allocs.end(), [](const AllocationRecord& a) {
    return a.is_head && LaunchSent(a);
  });
  EMBODY_RETURN_IF_ERROR(Transition(uow, victim, JobState::kRestarting, why, "scheduler", now));
  if (!launched) {
    EMBODY_RETURN_IF_ERROR(
        Transition(uow, victim, JobState::kPending, why + ", requeued", "scheduler", now));
  }
  common::LogInfo("job preempted", {{"job", std::to_string(victim.id)},
                                    {"for_job", std::to_string(for_job)},
                                    {"reason", reason},
                                    {"launched", launched ? "true" : "false"}});
  return Status::Ok();
}

}  // namespace

Result<std::vector<JobRecord>> SchedulerLoop::ReadPending(UnitOfWork& uow) {
  std::vector<JobRecord> kept = std::move(pending_);
  pending_.clear();
  if (kept.empty()) return uow.jobs().ListInStates({JobState::kPending}, false);
  EMBODY_ASSIGN_OR_RETURN(versions, uow.jobs().PendingVersions());
  std::vector<JobRecord> out;
  out.reserve(versions.size());
  std::vector<int64_t> stale;  // new since the last cycle, or written since
  auto k = kept.begin();
  for (const JobVersion& v : versions) {
    while (k != kept.end() && k->id < v.id) ++k;
    if (k != kept.end() && k->id == v.id && k->version == v.version) {
      out.push_back(std::move(*k));
    } else {
      stale.push_back(v.id);
    }
  }
  if (stale.empty()) return out;
  EMBODY_ASSIGN_OR_RETURN(fresh, uow.jobs().GetMany(stale, false));
  // Written again between the two reads: it may have left PENDING.
  std::erase_if(fresh, [](const JobRecord& j) { return j.state != JobState::kPending; });
  std::vector<JobRecord> merged;
  merged.reserve(out.size() + fresh.size());
  std::merge(std::make_move_iterator(out.begin()), std::make_move_iterator(out.end()),
             std::make_move_iterator(fresh.begin()), std::make_move_iterator(fresh.end()),
             std::back_inserter(merged),
             [](const JobRecord& a, const JobRecord& b) { return a.id < b.id; });
  return merged;
}

Status SchedulerLoop::PlacePending(CycleStats& stats) {
  EMBODY_ASSIGN_OR_RETURN(uow, BeginAsLeader());
  const int64_t now = now_();
  // Pending jobs are read without a lock, from the records the last cycle kept where their
  // rows are unchanged: the jobs this cycle places are locked and read again before they are
  // written, and a waiting job's reason is written only while it is still PENDING. The jobs
  // holding slots are only read, so heartbeats that lock them one by one never wait on a cycle
  // in a different order. A victim is locked on its own before it is preempted.
  EMBODY_ASSIGN_OR_RETURN(jobs, ReadPending(*uow));
  const size_t pending_count = jobs.size();
  const bool any_pending = !jobs.empty();
  EMBODY_ASSIGN_OR_RETURN(holders,
                          uow->jobs().ListInStates({JobState::kScheduled, JobState::kRunning,
                                                    JobState::kCancelling, JobState::kRestarting},
                                                   false));
  jobs.insert(jobs.end(), std::make_move_iterator(holders.begin()),
              std::make_move_iterator(holders.end()));
  // The pending jobs are jobs[0, pending_count), id ascending: found by bisection (a map of a
  // long queue was a tenth of an idle cycle).
  auto pending_job = [&jobs, pending_count](int64_t id) -> const JobRecord* {
    auto end = jobs.begin() + static_cast<ptrdiff_t>(pending_count);
    auto it = std::lower_bound(jobs.begin(), end, id,
                               [](const JobRecord& j, int64_t v) { return j.id < v; });
    return it != end && it->id == id ? &*it : nullptr;
  };
  EMBODY_ASSIGN_OR_RETURN(allocs, uow->allocations().All());
  EMBODY_ASSIGN_OR_RETURN(fair_share, uow->fair_share().Load());
  const std::vector<Holding> holdings = HoldingsOf(jobs, allocs);
  Accrual accrual = Accrue(fair_share, holdings, now, opts_.schedule.fair_share_half_life_seconds,
                           opts_.accrue_period_ms, opts_.accrue_max_gap_ms);
  if (accrual.due) {
    EMBODY_RETURN_IF_ERROR(uow->fair_share().Save(accrual.state));
    EMBODY_RETURN_IF_ERROR(uow->fair_share().AddDailyUsage(accrual.daily));
  }
  if (!any_pending) {
    if (hooks_.forecast_idle) hooks_.forecast_idle();
    return uow->Commit();
  }
  EMBODY_ASSIGN_OR_RETURN(nodes, uow->nodes().List());
  EMBODY_ASSIGN_OR_RETURN(tenants, uow->tenants().ListTenants(std::nullopt));
  // The decision sees history accrued up to now, also between the periods it is stored at: with
  // jobs shorter than the period, the stored history would lag a job or more behind.
  const FairShareState fresh =
      accrual.due ? accrual.state
                  : Accrue(fair_share, holdings, now, opts_.schedule.fair_share_half_life_seconds,
                           0, opts_.accrue_max_gap_ms)
                        .state;
  const ClusterSnapshot snapshot =
      BuildSnapshot(now, nodes, allocs, jobs, SchedTenantsOf(tenants, fresh.usage));
  if (hooks_.forecast) {
    // Jobs submitted since the last cycle, forecast from the snapshot this cycle decides on.
    std::vector<int64_t> fresh_ids;
    for (size_t i = 0; i < pending_count; ++i) {
      if (jobs[i].id > forecast_seen_id_) fresh_ids.push_back(jobs[i].id);
    }
    if (!fresh_ids.empty()) forecast_seen_id_ = fresh_ids.back();
    hooks_.forecast(snapshot, jobs, std::move(fresh_ids));
  }
  ScheduleDecision d = Schedule(snapshot, opts_.schedule);
  // The placed jobs, locked and read again: one cancelled (or otherwise changed state) since
  // the read above is not placed, and its slots wait for the next cycle.
  std::vector<int64_t> placed_ids;
  for (const Placement& p : d.placements) placed_ids.push_back(p.job_id);
  EMBODY_ASSIGN_OR_RETURN(locked_placed, uow->jobs().GetMany(placed_ids, true));
  std::map<int64_t, JobRecord*> still_pending;
  for (JobRecord& j : locked_placed) {
    if (j.state == JobState::kPending) still_pending[j.id] = &j;
  }
  std::vector<Placement> placements;
  for (Placement& p : d.placements) {
    if (still_pending.count(p.job_id) > 0) placements.push_back(std::move(p));
  }
  d.placements = std::move(placements);
  for (const Placement& p : d.placements) {
    // One token for the attempt, on every node of it: the head hands it to the job, the others
    // check the job's daemon requests against it (docs/multinode.md).
    const std::string job_token = common::RandomToken();
    for (size_t i = 0; i < p.nodes.size(); ++i) {
      AllocationRecord a;
      a.job_token = job_token;
      a.job_id = p.job_id;
      a.node_id = p.nodes[i].node_id;
      a.ranks = p.nodes[i].ranks;
      a.slots = p.nodes[i].slots;
      a.slot_type = p.slot_type;
      a.is_head = i == 0;
      EMBODY_RETURN_IF_ERROR(uow->allocations().Insert(a));
    }
    EMBODY_RETURN_IF_ERROR(
        Transition(*uow, *still_pending.at(p.job_id), JobState::kScheduled, "", "scheduler", now));
  }
  for (const Preemption& p : d.preemptions) {
    for (int64_t victim : p.victims) {
      EMBODY_ASSIGN_OR_RETURN(locked, uow->jobs().Get(victim, std::nullopt, true));
      auto reason = p.why.find(victim);
      if (locked) {
        EMBODY_RETURN_IF_ERROR(Preempt(*uow, *locked, p.job_id,
                                       reason == p.why.end() ? "" : reason->second, now));
      }
    }
  }
  std::vector<std::pair<int64_t, std::string>> reasons;
  for (const auto& [id, reason] : d.waiting) {
    const JobRecord* job = pending_job(id);
    if (job != nullptr && job->reason != reason) reasons.emplace_back(id, reason);
  }
  EMBODY_ASSIGN_OR_RETURN(written, uow->jobs().SetWaitingReasons(reasons, now));
  EMBODY_RETURN_IF_ERROR(uow->Commit());
  // Kept for the next cycle: the pending records, with the reasons and versions just written.
  // The records, `reasons` (from d.waiting, a map) and `written` (once sorted) are all id
  // ascending, and every row written had a reason.
  jobs.resize(pending_count);
  std::sort(written.begin(), written.end(),
            [](const JobVersion& a, const JobVersion& b) { return a.id < b.id; });
  auto r = reasons.begin();
  auto w = written.begin();
  for (JobRecord& j : jobs) {
    if (w == written.end()) break;
    if (w->id != j.id) continue;
    while (r != reasons.end() && r->first != j.id) ++r;
    if (r == reasons.end()) break;
    j.reason = std::move(r->second);
    j.updated_ms = now;
    j.version = w->version;
    ++w;
  }
  pending_ = std::move(jobs);
  stats.scheduled += static_cast<int64_t>(d.placements.size());
  // Every node of a placement: the head gets its launch, the others their worker command, which
  // must be there before the head's mpirun asks them to start a daemon.
  for (const Placement& p : d.placements) {
    for (const auto& n : p.nodes) stats.command_nodes.push_back(n.node_id);
  }
  stats.preempted = stats.preempted || !d.preemptions.empty();
  stats.waiting += static_cast<int64_t>(d.waiting.size());
  return Status::Ok();
}

Status SchedulerLoop::Count(CycleStats& stats) {
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(counts, uow->jobs().CountByStateAndTenant());
  EMBODY_ASSIGN_OR_RETURN(nodes, uow->nodes().List());
  stats.jobs = std::move(counts);
  stats.queue_depth = 0;
  for (const auto& [key, n] : stats.jobs) {
    if (key.first == "PENDING") stats.queue_depth += n;
  }
  stats.nodes_by_state["UP"] = 0;
  stats.nodes_by_state["DOWN"] = 0;
  for (const NodeRecord& n : nodes) stats.nodes_by_state[n.state] += 1;
  stats.counted = true;
  return Status::Ok();
}

Status SchedulerLoop::CancelOverdue() {
  EMBODY_ASSIGN_OR_RETURN(uow, BeginAsLeader());
  EMBODY_ASSIGN_OR_RETURN(n, EnforceTimeLimits(*uow, now_()));
  if (n == 0) return Status::Ok();
  return uow->Commit();
}

Status SchedulerLoop::RunOnce(CycleStats* stats, std::optional<int64_t> epoch) {
  return RunCycle(stats, epoch, /*housekeeping=*/true);
}

Status SchedulerLoop::RunCycle(CycleStats* stats, std::optional<int64_t> epoch,
                               bool housekeeping) {
  epoch_ = epoch;
  CycleStats ignored;
  if (housekeeping) {
    EMBODY_RETURN_IF_ERROR(MarkLostNodes());
    EMBODY_RETURN_IF_ERROR(CancelOverdue());
  }
  return PlacePending(stats ? *stats : ignored);
}

void SchedulerLoop::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void SchedulerLoop::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void SchedulerLoop::Wake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    woken_ = true;
  }
  cv_.notify_all();
}

uint64_t SchedulerLoop::WakeForCapacity() {
  uint64_t next = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    woken_ = true;
    woken_for_capacity_ = true;
    // A cycle under way may have read before the capacity was freed; the next one starts after.
    next = cycles_started_ + 1;
  }
  cv_.notify_all();
  return next;
}

void SchedulerLoop::Loop() {
  std::string last_error;
  double last_count = -1e9;
  double last_start = -1e9;
  double last_seconds = 0;  // the previous cycle's duration
  double last_housekeeping = -1e9;
  while (true) {
    uint64_t seq = 0;
    bool woken = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      const double paced = opts_.woken_gap_cycles * last_seconds;
      cv_.wait_for(lock, std::chrono::duration<double>(std::max(opts_.period_ms / 1000.0, paced)),
                   [&] { return stop_ || woken_; });
      const double gap = std::max(opts_.woken_gap_ms / 1000.0, paced);
      const double gap_left = gap - (common::MonotonicSeconds() - last_start);
      if (!stop_ && woken_ && !woken_for_capacity_ && gap_left > 0) {
        cv_.wait_for(lock, std::chrono::duration<double>(gap_left),
                     [&] { return stop_ || woken_for_capacity_; });
      }
      if (stop_) return;
      woken = woken_;
      woken_ = false;
      woken_for_capacity_ = false;
      seq = ++cycles_started_;
    }
    CycleStats stats;
    stats.seq = seq;
    const double start = common::MonotonicSeconds();
    last_start = start;
    const std::optional<int64_t> epoch = try_lead_ ? try_lead_() : std::nullopt;
    stats.leader = try_lead_ ? epoch.has_value() : true;
    const bool housekeeping =
        !woken || start - last_housekeeping >= opts_.period_ms / 1000.0;
    Status st = stats.leader ? RunCycle(&stats, epoch, housekeeping) : Status::Ok();
    if (st.ok() && stats.leader && housekeeping) last_housekeeping = start;
    // Deposed between the lock check and a write: nothing of this cycle was written, and the
    // next cycle's check finds the lock lost.
    if (IsDeposed(st)) stats.leader = false;
    stats.seconds = common::MonotonicSeconds() - start;
    last_seconds = stats.seconds;
    if (hooks_.on_decided) hooks_.on_decided(stats);
    // Woken cycles can come many times a second under a burst of submits; counting every job
    // each time would cost more than the scheduling.
    if (st.ok() && start - last_count >= opts_.count_period_ms / 1000.0) {
      st = Count(stats);
      if (st.ok()) last_count = start;
    }
    // Say it once per distinct error, so a database outage does not flood the log.
    if (!st.ok() && st.ToString() != last_error) {
      common::LogWarn("scheduler cycle failed", {{"error", st.ToString()}});
    }
    last_error = st.ok() ? "" : st.ToString();
    if (st.ok() && observe_) observe_(stats);
  }
}

}  // namespace controlplane::service
