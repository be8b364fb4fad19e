#include "api/job_state.h"

namespace api {

namespace {
constexpr JobState kAll[] = {JobState::kPending,   JobState::kScheduled,  JobState::kRunning,
                             JobState::kSucceeded, JobState::kFailed,     JobState::kCancelling,
                             JobState::kCancelled, JobState::kRestarting};
}

const char* JobStateName(JobState s) {
  switch (s) {
    case JobState::kPending: return "PENDING";
    case JobState::kScheduled: return "SCHEDULED";
    case JobState::kRunning: return "RUNNING";
    case JobState::kSucceeded: return "SUCCEEDED";
    case JobState::kFailed: return "FAILED";
    case JobState::kCancelling: return "CANCELLING";
    case JobState::kCancelled: return "CANCELLED";
    case JobState::kRestarting: return "RESTARTING";
  }
  return "PENDING";
}

std::optional<JobState> ParseJobState(const std::string& name) {
  for (JobState s : kAll) {
    if (name == JobStateName(s)) return s;
  }
  return std::nullopt;
}

bool IsTerminal(JobState s) {
  return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kCancelled;
}

bool CanTransition(JobState from, JobState to) {
  using S = JobState;
  switch (from) {
    case S::kPending:
      return to == S::kScheduled || to == S::kCancelled;
    case S::kScheduled:
      // A job can finish before its head agent reports it running.
      return to == S::kRunning || to == S::kSucceeded || to == S::kFailed ||
             to == S::kCancelling || to == S::kRestarting || to == S::kPending;
    case S::kRunning:
      return to == S::kSucceeded || to == S::kFailed || to == S::kCancelling ||
             to == S::kRestarting;
    case S::kCancelling:
      return to == S::kCancelled;
    case S::kRestarting:
      // CANCELLING: a preempted job cancelled before its processes are gone. SUCCEEDED: one that
      // finished its work on its own before the kill reached it.
      return to == S::kPending || to == S::kFailed || to == S::kCancelled ||
             to == S::kCancelling || to == S::kSucceeded;
    case S::kSucceeded:
    case S::kFailed:
    case S::kCancelled:
      return false;
  }
  return false;
}

}  // namespace api
