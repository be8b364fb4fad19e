// Where a job's processes are, written down so that a process other than the agent that started
// them can find and stop every one: the job's watcher (agent/jobs/job_watcher.h) when its agent is
// gone, and a restarted agent reconciling what an earlier one left (agent/jobs/job_record.h).
//
// Three nets, because each misses something: the launcher's session and its descendants (mpirun
// and its ranks; the launcher named with its start time, so a recycled pid is never touched), the
// job's cgroup (a daemon that left the tree), and, where the job has a uid of its own and no
// cgroup, every process of that uid (unique among one agent's jobs; several agents on one host,
// as in tests, may each give a job the same uid, which the cgroup never confuses).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/sandbox/cgroup.h"
#include "agent/sandbox/process_tree.h"
#include "common/status.h"

namespace agent {

struct JobProcesses {
  int64_t job_id = 0;
  ProcessId launcher;               // pid 0: nothing was started
  std::optional<uid_t> uid;         // the job's own uid; none when jobs run as the agent
  CgroupVersion cgroup_version = CgroupVersion::kNone;
  std::vector<std::string> cgroup_dirs;
};

nlohmann::json ToJson(const JobProcesses& p);
// Refuses what an agent would never have written: a uid of root, cgroup directories outside
// /sys/fs/cgroup or with "..", a negative pid.
common::Result<JobProcesses> ParseJobProcesses(const nlohmann::json& j);

// Live processes the three nets catch (the launcher's session only while the launcher is the same
// process, or a zombie of it: the session id cannot be reused before it is reaped).
std::vector<ProcessId> FindJobProcesses(const JobProcesses& p);

// SIGTERM to every process found (the engine writes a checkpoint on it), SIGKILL to what is left
// after `term_grace`, then the cgroup directories are removed. Returns how many processes were
// found at first. Never signals the calling process.
int StopJobProcesses(const JobProcesses& p, std::chrono::milliseconds term_grace);

}  // namespace agent
