// The node's share of every job launch (agent/jobs/job_sandbox_options.h).
#include "agent/jobs/job_sandbox_options.h"

#include <unistd.h>

#include <algorithm>

#include "common/log.h"

namespace agent {

namespace {

std::string Under(const std::string& data_dir, const char* kind, int64_t job_id) {
  return data_dir + "/" + kind + "/job-" + std::to_string(job_id);
}

}  // namespace

std::string JobSandboxOptions::JobDir(int64_t job_id) const {
  return Under(data_dir, "jobs", job_id);
}

std::string JobSandboxOptions::LogDir(int64_t job_id) const {
  return Under(data_dir, "logs", job_id);
}

std::string JobSandboxOptions::CheckpointDir(int64_t job_id) const {
  return Under(data_dir, "checkpoints", job_id);
}

std::string JobSandboxOptions::DownloadDir(int64_t job_id) const {
  return Under(data_dir, "downloads", job_id);
}

LaunchInput JobSandboxOptions::LaunchInputFor(int64_t job_id) const {
  LaunchInput in;
  in.job_id = job_id;
  in.local_address = address;
  in.job_dir = JobDir(job_id);
  in.checkpoint_dir = CheckpointDir(job_id);
  in.mpirun = mpirun;
  in.engine = engine;
  in.rank_exec = rank_exec;
  in.rsh_exec = rsh_exec;
  in.ca_file = ca_file;
  in.python_sdk = python_sdk;
  in.rendezvous_wait = rendezvous_wait;
  in.path = sandbox.path;
  in.mpi_settings = mpi_settings;
  // Root without the uid switch: Open MPI must be told it may run as root.
  in.as_root = ::geteuid() == 0 && !sandbox.switch_uid;
  // mpirun takes whole seconds; a grace below one second still gives the ranks one.
  in.kill_grace_s = std::max<int>(1, static_cast<int>((kill_grace.count() + 999) / 1000));
  return in;
}

common::Status GrantJobNetwork(const JobSandboxOptions& options, uid_t uid,
                               std::vector<std::string> peers,
                               const std::vector<api::HostSlot>& hosts) {
  if (options.network == nullptr) return common::Status::Ok();
  JobNetworkGrant grant;
  grant.uids = {uid};
  for (const api::HostSlot& h : hosts) {
    peers.push_back(h.address);
    if (h.agent_url.empty()) continue;
    auto agent = EndpointOfUrl(h.agent_url);
    if (agent.ok()) {
      grant.agents.push_back(*agent);
    } else {
      common::LogInfo("a peer agent named by host name: reached at its node's address only",
                      {{"agent_url", h.agent_url}});
    }
  }
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
  grant.peers = std::move(peers);
  return options.network->Grant(std::move(grant));
}

void RevokeJobNetwork(const JobSandboxOptions& options, uid_t uid) {
  if (options.network == nullptr) return;
  if (common::Status st = options.network->Revoke({uid}); !st.ok()) {
    common::LogWarn("cannot remove a job uid's network rules",
                    {{"uid", std::to_string(uid)}, {"error", st.message()}});
  }
}

}  // namespace agent
