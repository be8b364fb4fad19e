// embody-agent assembled: the job sandbox, the node's probes and metrics, the job-local API, the
// rsh bridge, the job runner with its reconciliation, the heartbeat loop and the retention of
// finished jobs' directories. main.cc and in-process tests and tools start agents through here.
//
//   auto agent = agent::Agent::Create(options);  // prepares; starts no thread
//   agent->Start();                              // serves, reconciles, heartbeats
//   ...
//   agent->Stop();                               // or the destructor
//
// Create decides and prepares what the node can give jobs (uid switch, data directory layout,
// dataset root, cgroups) and probes the node; nothing runs yet. Start binds the local API (the
// port is known from then on), writes the port file, takes over what an earlier agent process on
// this data directory left, then starts heartbeating. Stop kills the running jobs (whole trees)
// and reports them in a last heartbeat, then ends the local API, the rsh bridge's daemons and
// every thread the agent started, and removes the agent's cgroups.
//
// Signals are the caller's business: main.cc blocks SIGTERM and SIGINT before Create, so every
// thread inherits the mask (spawned jobs get a clean one, agent/sandbox/spawn.h). Not thread-safe:
// Start and Stop come from one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agent/agent_flags.h"
#include "api/agent_protocol.h"
#include "common/status.h"

namespace agent {

class Agent {
 public:
  // `options` as ParseAgentFlags returns them: server, token, data_dir and agent_binary set.
  // Fails (nothing left running) when the data directory, the dataset root or the cgroups
  // cannot be prepared.
  static common::Result<std::unique_ptr<Agent>> Create(AgentOptions options);
  ~Agent();  // Stop()
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Once. Returns when the local API serves and the heartbeat thread runs (registration follows
  // on that thread, retried until the server answers). failed_precondition when called twice
  // or after Stop.
  common::Status Start();
  // Idempotent; returns once every job this agent started and every thread it owns has ended.
  void Stop();

  // 0 until the server accepted the registration.
  int64_t node_id() const;
  // The local API's port, once Start succeeded; 0 before.
  int local_api_port() const;
  // The local API as jobs reach it (EMBODY_AGENT_URL), once started.
  std::string local_api_url() const;
  // The data directory, absolute and normalised.
  const std::string& data_dir() const;
  // What this node isolates, as reported at registration.
  const api::NodeIsolation& isolation() const;
  // Jobs running here that this node heads.
  std::vector<int64_t> RunningJobs() const;

 private:
  struct Impl;
  explicit Agent(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace agent
