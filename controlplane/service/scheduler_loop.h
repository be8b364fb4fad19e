// The scheduler loop: every period (or sooner when woken by a submit, a registration or a freed
// allocation) the leader replica runs one cycle:
//   1. nodes silent for 3 heartbeat intervals become DOWN; their jobs restart (RESTARTING ->
//      PENDING with attempt+1) while restarts are left, else FAILED "node X lost";
//   2. RUNNING jobs past their time limit are cancelled (time_limits.h);
//   3. usage is accounted (usage_accounting.h): the tenants' fair-share history and daily
//      slot-seconds advance by what their jobs hold;
//   4. PENDING jobs are placed by Schedule() (scheduler.h) onto UP nodes; allocations and
//      PENDING -> SCHEDULED are written in one transaction; jobs that wait get their `reason`;
//      jobs preempted to make room become RESTARTING (they keep their slots, the heartbeat sends
//      them a kill, and when their head reports them gone they return to PENDING).
// Leadership is decided outside (a PostgreSQL advisory lock, db/leader_lock.h), which hands the
// loop the epoch of its leadership; every unit of work of a cycle holds that epoch before it
// writes (leader_fence.h), so a leader deposed mid-cycle commits nothing more. Replicas that are
// not the leader only observe.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "controlplane/service/jobs_service.h"
#include "controlplane/service/node_heard.h"
#include "controlplane/service/scheduler.h"
#include "controlplane/service/store.h"

namespace controlplane::service {

// What one cycle saw, for the server's metrics. Every replica reports cycles; only the leader's
// carry decisions and a duration. The counts are refreshed at most once per `count_period_ms`
// (they are a GROUP BY over all jobs), and `counted` says whether this cycle refreshed them.
struct CycleStats {
  // This cycle's number in the loop (1, 2, ...; 0 from RunOnce outside the loop). A cycle
  // numbered at or past what WakeForCapacity returned started after that wake.
  uint64_t seq = 0;
  bool leader = false;
  double seconds = 0;
  int64_t scheduled = 0;  // jobs placed this cycle
  // Nodes that have a command since this cycle (every node of a placed job: the head's launch,
  // the others' worker commands); `preempted`: some
  // job was preempted, and every node may have a kill. Held heartbeats are woken for them.
  std::vector<int64_t> command_nodes;
  bool preempted = false;
  int64_t waiting = 0;    // pending jobs that did not fit this cycle
  bool counted = false;
  int64_t queue_depth = 0;  // PENDING jobs after the cycle
  std::map<std::pair<std::string, std::string>, int64_t> jobs;  // (state, tenant) -> count
  std::map<std::string, int64_t> nodes_by_state;
};

// Called in every cycle that has pending jobs, before its decision, with the snapshot it decides
// on, the jobs it was built from and the pending jobs submitted since the hook was last called
// (ids ascending; all pending jobs in the first cycle; often none): forecast_service.h records
// their forecasts and keeps the snapshot for dry runs.
using ForecastHook = std::function<void(const ClusterSnapshot&, const std::vector<JobRecord>&,
                                        std::vector<int64_t>)>;

// What a SchedulerLoop tells or consults besides its store, fixed when it is built. Every field
// is optional: the default leaves that part out. Pointers must outlive the loop.
struct SchedulerLoopHooks {
  // Heartbeats this server received, committed or not (node_heard.h), for the DOWN rule; null:
  // the database only.
  const NodeHeard* heard = nullptr;
  // Called with every loop cycle's stats as soon as its decisions are committed (or failed),
  // before the jobs are counted for `observe`: the commands it made go out without waiting for
  // that count.
  std::function<void(const CycleStats&)> on_decided = nullptr;
  // See ForecastHook; empty: no forecast is made.
  ForecastHook forecast = nullptr;
  // Called in every cycle that finds no pending job: a snapshot kept from an earlier cycle no
  // longer describes the queue (its jobs started, ended or were cancelled).
  std::function<void()> forecast_idle = nullptr;
};

class SchedulerLoop {
 public:
  struct Options {
    int heartbeat_interval_ms = 1000;
    int period_ms = 500;
    int count_period_ms = 1000;  // how often jobs and nodes are counted for the metrics
    // A woken cycle starts no sooner than this, nor than `woken_gap_cycles` times the previous
    // cycle's duration, after the previous cycle started. Every submit wakes the loop, and each
    // cycle reads the whole queue: back-to-back cycles under a burst of submits cost the
    // database more than the submits themselves (docs/benchmarks.md), and the more so the
    // longer the queue. Within the gap one cycle takes every submit that arrived; a woken
    // cycle thus takes at most 1/woken_gap_cycles of the time, and a job waits at most the gap
    // longer. Cycles woken by freed capacity are not delayed. The period's cycles start
    // `period_ms` after the previous one ended, or `woken_gap_cycles` times its duration when
    // that is longer: with a queue of 100,000 jobs an idle loop would otherwise decide over it
    // without a pause, for nothing new.
    int woken_gap_ms = 20;
    int woken_gap_cycles = 4;
    ScheduleOptions schedule;
    // Fair-share history and usage_daily are advanced at most this often (usage_accounting.h),
    // and after a gap (no leader, server down) by at most `accrue_max_gap_ms` of holding.
    int accrue_period_ms = 1000;
    int accrue_max_gap_ms = 60'000;
  };
  // `try_lead`: the epoch of this replica's leadership, nullopt when it does not lead; null: it
  // always leads, unfenced (a single replica, tests). `observe`: called with the stats of every
  // loop cycle that succeeded, last, after the count when one was due (CycleStats::counted);
  // null: none is.
  SchedulerLoop(Database& db, Options opts, Clock now,
                std::function<std::optional<int64_t>()> try_lead,
                std::function<void(const CycleStats&)> observe, SchedulerLoopHooks hooks = {})
      : db_(db), opts_(opts), now_(std::move(now)), try_lead_(std::move(try_lead)),
        observe_(std::move(observe)), hooks_(std::move(hooks)), judging_since_ms_(now_()) {}
  ~SchedulerLoop() { Stop(); }

  // One cycle as leader (tests call this directly); `stats` (optional) gets its decisions.
  // `epoch`: the leadership every unit of work holds (failed_precondition, nothing written,
  // once it is not current); nullopt: unfenced.
  Status RunOnce(CycleStats* stats = nullptr, std::optional<int64_t> epoch = std::nullopt);
  // The loop's cycle: RunOnce, where `housekeeping` false leaves out steps 1 and 2 (lost nodes,
  // time limits). The loop does so in woken cycles within a period of the last that did them:
  // every job end wakes a cycle, whose placement should not wait on two more transactions that
  // a period's delay does not change (a node is lost after 3 intervals).
  Status RunCycle(CycleStats* stats, std::optional<int64_t> epoch, bool housekeeping);

  void Start();
  void Stop();
  // New work (a submission, a cancel): a cycle soon, gapped as Options::woken_gap_ms says.
  void Wake();
  // Freed capacity (a job ended, a node came back): a cycle now, without the gap, since the
  // queue's next job waits on it and a slot should not idle for the gap. Returns the number
  // (CycleStats::seq) of the first cycle sure to start after this wake: the one that sees the
  // capacity freed before the call.
  uint64_t WakeForCapacity();

 private:
  // A unit of work holding the cycle's leadership epoch, if it has one.
  Result<std::unique_ptr<UnitOfWork>> BeginAsLeader();
  Status MarkLostNodes();
  Status CancelOverdue();  // time_limits.h
  Status PlacePending(CycleStats& stats);
  // The PENDING jobs, id ascending, as they are now: the records kept from the last cycle whose
  // version is still the row's, and the others read again (see pending_).
  Result<std::vector<JobRecord>> ReadPending(UnitOfWork& uow);
  Status Count(CycleStats& stats);
  void Loop();

  Database& db_;
  const Options opts_;
  Clock now_;
  std::function<std::optional<int64_t>()> try_lead_;
  std::optional<int64_t> epoch_;  // of the cycle running (RunOnce is never concurrent)
  std::function<void(const CycleStats&)> observe_;
  const SchedulerLoopHooks hooks_;
  int64_t forecast_seen_id_ = 0;  // the highest pending job id handed to the hook
  // The PENDING jobs as the last cycle that committed left them (id ascending, with their row
  // versions). A queue of 100,000 jobs costs a cycle a read of their ids and versions rather than
  // of every row and spec; emptied when a cycle fails, so it never holds what was rolled back.
  std::vector<JobRecord> pending_;
  // Since when this server can have heard every node: its start. A node is lost only after 3
  // silent intervals within that time, so agents reconnecting to a restarted server are not held
  // DOWN for the server's own absence. (Replicas record heartbeats in the database, whichever
  // leads, so a change of leader needs no such grace.)
  int64_t judging_since_ms_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool woken_ = false;
  bool woken_for_capacity_ = false;
  uint64_t cycles_started_ = 0;  // under mu_, counted as each loop cycle starts
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace controlplane::service
