// The agent's conversation with the server: register, then heartbeat every interval.
//
// Each heartbeat carries the running jobs, the launches the runner holds (which acknowledge their
// launch commands: the server repeats a launch until it sees it here), the finished jobs not yet
// acknowledged, queued events and new log bytes; only when the server answers are the finished
// jobs, events and log offsets committed, so nothing is lost to a failed request. A finished job
// is reported only in a heartbeat that also carries the rest of its logs and events, so when the
// server sees a job end it has everything the job wrote. Commands in the reply (launch, kill) go to the JobRunner.
//
// Failures back off exponentially (with jitter) up to a cap; a 404 means the server forgot this
// node (database reset) and the agent registers again after a short back-off.
//
// Credentials (agent/heartbeat/node_credential.h): a node credential in a registration reply is
// stored and used from then on. A 401 to a call made with the node credential means the server no
// longer accepts it: the agent forgets it and registers with the join token (at once for a refused
// registration, at the next round for a refused heartbeat).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <random>

#include "agent/node/agent_metrics.h"
#include "agent/heartbeat/event_queue.h"
#include "agent/jobs/job_runner.h"
#include "agent/heartbeat/node_credential.h"
#include "agent/jobs/rank_logs.h"
#include "agent/heartbeat/server_client.h"

namespace agent {

struct HeartbeatOptions {
  api::RegisterRequest node;
  size_t max_events_per_heartbeat = 2000;
  // Event bytes one heartbeat carries at most (the rest goes in the next); with the logs'
  // RankLogs::kDefaultBatchBytes this keeps a heartbeat far below the server's body limit.
  size_t max_event_bytes_per_heartbeat = 1024 * 1024;
  std::chrono::milliseconds first_backoff{500};
  std::chrono::milliseconds max_backoff{30000};
  // Idle heartbeats (nothing to report) ask the server to hold them until it has a command for
  // this node, at most one interval (api::HeartbeatRequest::wait_ms): launches arrive at once.
  // Heartbeats reporting ended jobs ask too: the server answers them once the scheduling pass
  // their freed slots woke is over, with what it placed there.
  bool hold_idle_heartbeats = true;
};

class HeartbeatLoop {
 public:
  // `credential` is the one `server` sends; everything must outlive the loop.
  HeartbeatLoop(HeartbeatOptions options, ServerChannel* server, NodeCredential* credential,
                JobRunner* runner, RankLogs* logs, EventQueue* events, AgentMetrics* metrics);

  // Loops until Stop().
  void Run();
  void Stop();
  // Ends the current wait early (e.g. a job finished and should be reported now).
  void Wake();
  // Receives the worker commands of every successful reply (the whole set, possibly empty) and
  // the kill commands (agent/rsh/rsh_bridge.h); `held` says which assignments are held in full, for
  // each heartbeat's `workers` (null: not sent, every worker command comes in full). Set before
  // Run.
  void SetWorkerHandler(std::function<void(const std::vector<api::Command>& workers)> on_workers,
                        std::function<void(int64_t job_id)> on_kill,
                        std::function<std::vector<api::LaunchAck>()> held = nullptr) {
    on_workers_ = std::move(on_workers);
    on_kill_ = std::move(on_kill);
    held_workers_ = std::move(held);
  }

  // kInterrupted: a held heartbeat given up by Wake(); it reported nothing, nothing is lost.
  enum class Outcome { kOk, kFailed, kReregister, kInterrupted };
  // One round: register if needed, else one heartbeat. With `execute_commands` false the reply's
  // commands are ignored (used for the last heartbeat while the agent shuts down).
  Outcome RunOnce(bool execute_commands = true);

  int64_t node_id() const;
  std::chrono::milliseconds interval() const;

 private:
  Outcome Register();
  std::chrono::milliseconds Backoff(int failures);
  void WaitFor(std::chrono::milliseconds d);

  HeartbeatOptions options_;
  ServerChannel* server_;
  NodeCredential* credential_;
  JobRunner* runner_;
  RankLogs* logs_;
  EventQueue* events_;
  AgentMetrics* metrics_;
  std::function<void(const std::vector<api::Command>&)> on_workers_;
  std::function<void(int64_t)> on_kill_;
  std::function<std::vector<api::LaunchAck>()> held_workers_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool woken_ = false;
  bool in_held_call_ = false;  // a heartbeat the server may hold is in flight
  bool interrupted_ = false;   // Wake() aborted it
  // What the last successful round asks of the next: go again at once (it had commands to
  // acknowledge, or reported ended jobs whose slots may get new work), or wait what is left of
  // the interval after `last_call_`'s time in flight.
  bool again_at_once_ = false;
  std::chrono::milliseconds last_call_{0};
  int64_t node_id_ = 0;
  std::chrono::milliseconds interval_{1000};
  std::minstd_rand rng_;
};

}  // namespace agent
