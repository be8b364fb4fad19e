// One simulated node for bench/agent_simulator and bench/forecast_bench: the agent's side of the
// heartbeat protocol (api/agent_protocol.h) as a state machine, without processes. It holds the
// launches the server sent, "runs" each job for a simulated time (a `command` job of the form
// ["sleep", "S"] for S seconds, as the real agent would; any other job for the fixed
// `job_seconds`), and reports what a real agent would: the running jobs, every launch it holds
// (the acknowledgement the server waits for), a step event while the job runs, and at its end a
// second step event, a line of rank-0 log and the exit. The worker assignments of multi-node jobs
// (Command::kWorker) are held as the real agent holds them, listed back so the server sends them
// short, and never run: the head's launch is the job.
//
// Like agent/heartbeat/heartbeat_loop.h, what a heartbeat carries is committed only when the server
// answers it (Commit), so a failed heartbeat loses nothing and resends the same reports. A launch
// of an attempt already held or already finished is a no-op. A kill command ends the job as
// killed (exit 137). Nothing here does I/O or takes a lock: one worker thread drives one agent at
// a time (bench/agent_sim/agent_pool.h).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "api/agent_protocol.h"

namespace bench {

// What a simulated agent saw happen to jobs, for the simulator's totals (JobTracker).
class JobObserver {
 public:
  virtual ~JobObserver() = default;
  virtual void Launched(int64_t job_id, double now) = 0;
  // The server acknowledged the job's end (the heartbeat that reported it was answered).
  virtual void Finished(int64_t job_id, int exit_code, double now) = 0;
};

class SimAgent {
 public:
  // `job_seconds`: how long every job "runs" after its launch arrives.
  SimAgent(std::string name, double job_seconds)
      : name_(std::move(name)), job_seconds_(job_seconds) {}

  const std::string& name() const { return name_; }

  // The heartbeat to send at `now` (seconds on a monotonic clock).
  api::HeartbeatRequest Build(double now);
  // The server answered `sent` (a heartbeat Build returned) with `reply`: commits what `sent`
  // carried and takes the reply's commands.
  void Commit(const api::HeartbeatRequest& sent, const api::HeartbeatResponse& reply, double now,
              JobObserver* observer);
  // The earliest time a held job ends and has not been reported: the agent heartbeats then
  // rather than waiting out its interval, as the real one wakes its loop on a job's exit.
  // Infinity when there is none.
  double NextJobEnd() const;
  int held() const { return static_cast<int>(jobs_.size()); }
  // Launch commands that repeated one this agent already held or ran (normal while an
  // acknowledgement is in flight; a steady count would mean acknowledgements are not taken).
  int64_t repeated_launches() const { return repeated_launches_; }

 private:
  struct Job {
    int attempt = 0;
    double ends = 0;
    bool killed = false;
    bool first_step_sent = false;  // committed
    int64_t log_offset = 0;        // where this attempt's rank-0 log continues
  };

  static nlohmann::json StepEvent(int64_t job_id, int step, double now);
  // How long a launched job runs: ["sleep", "S"] runs S seconds, anything else job_seconds_.
  double RunSecondsOf(const nlohmann::json& spec) const;

  const std::string name_;
  const double job_seconds_;
  std::map<int64_t, Job> jobs_;                 // held launches, by job id
  std::set<std::pair<int64_t, int>> finished_;  // (job, attempt) whose end was acknowledged
  std::vector<api::LaunchAck> workers_;  // the worker assignments of the last reply
  int64_t repeated_launches_ = 0;
};

}  // namespace bench
