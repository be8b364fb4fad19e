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
// (ScheduleOptions::explain). Both change nothing that is predicted: ForecastOptions::reference
// turns them off, and forecast_test.cc compares the two on random queues.
// Simplifications, each on the side of fewer events: fair-share usage stays as it is now; a
// preempted job leaves and is not requeued; nodes neither join nor leave. No I/O, no clock.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

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
  int max_cycles = 5000;  // Schedule() calls at most; past them a start is not predicted
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

}  // namespace controlplane::service
