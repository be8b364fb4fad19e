// Job states and the transitions between them (the job state machine).
//
//   PENDING -> SCHEDULED -> RUNNING -> SUCCEEDED | FAILED
//   any live state -> CANCELLING -> CANCELLED   (PENDING goes straight to CANCELLED)
//   SCHEDULED | RUNNING -> RESTARTING -> PENDING (node lost, restarts left) | FAILED
//   SCHEDULED | RUNNING -> RESTARTING -> PENDING (preempted: killed, then requeued when it ends)
//
// Every transition the server makes goes through CanTransition and is written as a row of
// job_events.
#pragma once

#include <optional>
#include <string>

namespace api {

enum class JobState {
  kPending,
  kScheduled,
  kRunning,
  kSucceeded,
  kFailed,
  kCancelling,
  kCancelled,
  kRestarting,
};

const char* JobStateName(JobState s);  // "PENDING", ...
std::optional<JobState> ParseJobState(const std::string& name);
bool IsTerminal(JobState s);
bool CanTransition(JobState from, JobState to);

}  // namespace api
