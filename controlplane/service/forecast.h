// Forecasts: when pending jobs are expected to start, found by running the scheduler's own
// decision (scheduler.h: Schedule) forward in time over a snapshot, not by a second model of it.
//
// The run: Schedule() at the snapshot's now; what it places starts then and is expected to end
// after its expected run time; then time jumps to the next expected end of a running job, that
// job's slots come back, and Schedule() runs again on the queue that is left, until every job
// asked about has started, can never fit, or no running job is expected to end. Reservations,
// backfill, quotas, fair share and preemption are therefore the scheduler's, cycle by cycle.
//
// Expected ends: a running job's is given by the caller (the planner's prediction, or its time
// limit); a job the run places ends after its expected run time (given per job, else its time
// limit). A job with neither is never expected to end, as in the scheduler's own model.
//
// Hand-over: a job the run places at an expected end starts `handover_ms` after it (the end's
// report, a scheduling cycle, the launch and its acknowledgement, as the server measures them:
// hand_over.h), and holds its slots from the end. Down a chain of jobs the delays add up, as
// they do on the cluster. Jobs placed at the snapshot's own time start then.
//
// Cost: an expected end at which no pending job's shape fits on the free slots at all (before
// reservations and quotas) cannot change the decision unless preemption is on, so the run jumps
// over it without a Schedule() call; the calls after the first ask for no waiting reasons
// (ScheduleOptions::explain) and decide over a queue kept in order across the run
// (ScheduleQueue, pending_queue.h), which stops where the rest of the queue can change nothing,
// so a cycle's cost does not grow with the queue behind. None of this changes what is predicted:
// ForecastOptions::reference turns them off, and forecast_test.cc compares the two on random
// queues. A dry run against a kept run of the queue: ForwardPlan below.
// Simplifications, each on the side of fewer events: fair-share usage stays as it is now; a
// preempted job leaves and is not requeued; nodes neither join nor leave. No I/O, no clock.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "controlplane/service/pending_queue.h"
#include "controlplane/service/scheduler.h"

namespace controlplane::service {

struct ForecastTimes {
  // Expected end of running jobs (epoch ms); absent: start + time limit, or never without one.
  std::unordered_map<int64_t, int64_t> running_end_ms;
  // Expected run time of pending jobs (ms) once started; absent: the time limit, or never.
  std::unordered_map<int64_t, int64_t> run_ms;
  // The pending jobs whose run_ms comes from what jobs ran for against their limits
  // (run_time_history.h) rather than from the planner: only said in the forecast, not used here.
  std::unordered_set<int64_t> learned;
  // Time from a job's end to the start of the job placed on its slots (ms); 0: none.
  int64_t handover_ms = 0;
};

struct ForecastOptions {
  ScheduleOptions schedule;
  // Schedule() calls at most; past them a start is not predicted. A cycle over the kept queue
  // costs what its jobs up to the first that can change nothing cost, so a queue of 10,000
  // one-node jobs (about a cycle per job ahead) fits.
  int max_cycles = 20000;
  // true: Schedule(), with its reasons, at every expected end: the plain run the fast one is
  // tested against.
  bool reference = false;
};

struct JobForecast {
  int64_t job_id = 0;
  bool starts_now = false;
  std::optional<int64_t> start_ms;  // nullopt: not predicted (unknown_reason says why)
  std::optional<int64_t> end_ms;    // start + expected run time; nullopt: not expected to end
  std::string slot_type;
  std::vector<NodeShare> nodes;  // where it starts, the head first
  // The scheduler's reason now ("" when it starts now), and what it waits on, for people.
  std::string reason_now;
  std::vector<std::string> waits;
  int64_t jobs_ahead = 0;  // pending jobs the scheduler considers before it now
  std::string unknown_reason;
  bool never_fits = false;
};

// Forecasts for the pending jobs of `snapshot` named in `wanted` (all of them when empty).
std::map<int64_t, JobForecast> ForecastStarts(const ClusterSnapshot& snapshot,
                                              const ForecastTimes& times,
                                              const std::vector<int64_t>& wanted,
                                              const ForecastOptions& options);

// One turn of a forward run: an expected end (or the snapshot's now, first), and what the
// decision there started, preempted and where it stopped; `idle`: none was made (nothing fit).
struct PlanTurn {
  bool idle = false;
  ScheduleDecision decision;  // placements, preemptions, settled; no reasons
};

// The forward run of a snapshot's whole queue, kept to answer dry runs against it: the forecast
// of a job added to the queue is what ForecastStarts of the snapshot with that job predicts for
// it, without deciding again every turn that the job cannot change. A turn is replayed as kept
// when its cycle stopped (ScheduleQueue) before the job's turn in the order (a higher priority
// still being decided, or the job's tenant having older jobs of its priority still waiting: the
// job goes after them), every reservation being made and a shape asking no more than the job's
// being unable to be placed; an end at which nothing was decided is replayed when the job's
// shape does not fit on the free slots either. The first cycle is always decided with the job in
// it (its reasons are the job's), and so is every turn that the job might change, on the queue
// with the job; a turn decided with the job in it that the job did not change
// (neither placed, nor reserving, nor preempting: the decision is the kept one) leaves the run on
// the kept one, and replaying goes on after it. Cost: the first cycle, the decided turns, and a
// jump per run of kept turns (the kept run's state is saved every few turns, so a run of turns
// the job cannot change costs a copy of that state and the few turns after it). Immutable after
// construction; shared across threads.
struct PlanCheckpoint;  // forecast.cc

class ForwardPlan {
 public:
  ForwardPlan(ClusterSnapshot snapshot, ForecastTimes times, ForecastOptions options);
  ~ForwardPlan();

  // `job` (not in the snapshot) added to its queue; `run_ms`: its expected run time. Turns are
  // replayed only for a job that goes after every queued job of its tenant and priority (a
  // later submit time, or the same and a higher id), as a new submission does; any other is
  // forecast by a plain forward run.
  // `replayed`: how many turns were replayed rather than decided; `jumped`: how many of those
  // were passed over to a saved state of the kept run rather than replayed one by one.
  //
  // Answers are kept (up to kMaxAnswers per plan): a job that goes after every queued job (its
  // submit time and id above all of theirs, as a dry run's) is ordered the same whatever that
  // time, so its forecast is a function of its tenant, priority, resources, limit, id and run
  // time alone, and a second ask of the same is answered from the first (`cached` says so;
  // `replayed` is then 0).
  JobForecast Forecast(const PendingJob& job, std::optional<int64_t> run_ms,
                       size_t* replayed = nullptr, bool* cached = nullptr,
                       size_t* jumped = nullptr) const;

  const ClusterSnapshot& snapshot() const { return snapshot_; }
  const ForecastTimes& times() const { return times_; }
  size_t turns() const { return turns_.size(); }
  size_t checkpoints() const { return checkpoints_.size(); }
  static constexpr size_t kMaxAnswers = 1024;

 private:
  // What a kept answer depends on: tenant, priority, id, nodes, ranks per node, slot type,
  // slots per rank, memory per rank, time limit, expected run time (-1: none).
  using AnswerKey = std::tuple<int64_t, int, int64_t, int, int, std::string, int, int64_t,
                               int64_t, int64_t>;

  ClusterSnapshot snapshot_;
  ForecastTimes times_;
  ForecastOptions options_;
  std::vector<PlanTurn> turns_;
  // The run's state every kCheckpointEvery turns from turn 0 (forecast.cc), and its queue as
  // built: an answer starts from the first and jumps over turns the job cannot change to the
  // last one before the next turn it might, instead of replaying every turn.
  PendingQueue queue_;
  std::vector<std::unique_ptr<const PlanCheckpoint>> checkpoints_;
  std::tuple<int64_t, int64_t> last_queued_{std::numeric_limits<int64_t>::min(), 0};
  mutable std::mutex answers_mu_;
  mutable std::map<AnswerKey, JobForecast> answers_;
};

}  // namespace controlplane::service
