// What every process a node starts for a job has in common, whether the node heads the job
// (agent/jobs/job_runner.h starts mpirun) or runs Open MPI's daemon for a head elsewhere
// (agent/rsh/rsh_bridge.h): the data directory and its layout, this node's address, the binaries,
// the operator's Open MPI settings, the kill grace, the sandbox (agent/sandbox/sandbox.h: uid
// range, tenant groups, rlimits, PATH) and the cgroups. The agent fills it once and hands the same
// copy to both, so the head's ranks and the daemons' ranks cannot be confined differently.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "agent/sandbox/cgroup.h"
#include "agent/sandbox/job_network.h"
#include "agent/launch/mpi_launch.h"
#include "agent/sandbox/sandbox.h"
#include "api/agent_protocol.h"
#include "common/status.h"

namespace agent {

struct JobSandboxOptions {
  // <data-dir>: jobs/, logs/, checkpoints/, downloads/ hold one job-<id> directory per job.
  std::string data_dir;
  std::string address =
      "127.0.0.1";                // this node's address; the head's hosts elsewhere are not ours
  std::string mpirun = "mpirun";  // Open MPI's launcher; its daemon is the binary beside it
  std::string engine;             // embody-engine, for engine kinds
  // What job starts execute: every rank as `exec-rank`, a direct launch as `launch-ranks`, each
  // job's watcher as `watch-job`: embody-job-exec beside the agent, or the agent binary itself.
  std::string rank_exec;
  std::string rsh_exec;  // the embody-agent binary: mpirun's rsh agent (`rsh`); "": rank_exec
  // The CAs the agents' certificates chain to ("": the system's), readable by jobs: the rsh
  // launcher and the ranks' reports verify https agent URLs with it (EMBODY_CA_FILE).
  std::string ca_file;
  // The directory holding the Python SDK's package `embody`, put on every rank's PYTHONPATH
  // (jobs' uids can read it); "": jobs get no PYTHONPATH.
  std::string python_sdk;
  // libembody-rendezvous-wait.so for command jobs' ranks (LaunchInput::rendezvous_wait).
  std::string rendezvous_wait;
  // The operator's Open MPI settings (OpenMpiSettings of the agent's environment).
  std::vector<std::pair<std::string, std::string>> mpi_settings;
  std::chrono::milliseconds kill_grace{5000};  // SIGTERM to SIGKILL when a job is killed
  // sandbox.switch_uid must be false when the agent is not root (the agent decides).
  SandboxOptions sandbox;
  CgroupSetup cgroups;  // version kNone: no cgroups, RLIMIT_AS enforces memory
  // What a job's uid may reach on the network (agent/sandbox/job_network.h), granted before its
  // first process starts and revoked before its uid goes back to the pool; owned by the agent,
  // outliving every job. Null: jobs have the node's network (--job-network=host, or no uid of
  // their own to confine).
  JobNetwork* network = nullptr;

  std::string JobDir(int64_t job_id) const;         // <data-dir>/jobs/job-<id>
  std::string LogDir(int64_t job_id) const;         // <data-dir>/logs/job-<id>
  std::string CheckpointDir(int64_t job_id) const;  // <data-dir>/checkpoints/job-<id>
  std::string DownloadDir(int64_t job_id) const;    // <data-dir>/downloads/job-<id>

  // The parts of a launch of `job_id` that are the node's, not the command's: addresses,
  // directories, binaries, PATH, Open MPI settings, root or not, the kill grace in whole seconds.
  LaunchInput LaunchInputFor(int64_t job_id) const;
};

// Gives `uid` (a job's on this node) what the job may reach, when `options.network` confines
// jobs: the addresses in `peers` and of `hosts` (its nodes, from the server), this node's agent
// and the agents of `hosts` (their rsh launcher asks them for daemons). An address that is not an
// IP literal fails the grant (invalid_argument, naming it); an agent URL whose host is a name is
// left out (its node's address is a peer already). OK without a network.
common::Status GrantJobNetwork(const JobSandboxOptions& options, uid_t uid,
                               std::vector<std::string> peers,
                               const std::vector<api::HostSlot>& hosts);
// Takes back what GrantJobNetwork gave `uid`, before the uid returns to the pool; a failure is
// logged (the uid's next grant replaces what is left).
void RevokeJobNetwork(const JobSandboxOptions& options, uid_t uid);

}  // namespace agent
