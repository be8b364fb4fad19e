// The start of a job this node heads, in two halves around the runner's lock (job_runner.h):
//
//   Plan (lock held)    decides what the start takes from the node: the job's uid from the
//                       UidPool with its tenant's group, its GPUs from the node's pool, its
//                       cgroup limits, and mpirun's command line (agent/launch/mpi_launch.h).
//   Spawn (no lock)     writes the job's directories and launch files, makes its cgroup, forks
//                       the launcher in the job's sandbox (agent/sandbox/spawn.h), starts its
//                       watcher and rewrites its record: tens of milliseconds in which the other
//                       jobs' ends, the heartbeat and the local API do not wait.
//
// What Plan and Spawn took is given back by Release (lock held), on a refused start and when the
// job has ended. Plan and Release touch the job's uid, GPUs and cgroup; Spawn touches only the
// job it is given, which the runner marks preparing meanwhile.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "agent/jobs/held_job.h"
#include "agent/jobs/job_record.h"
#include "agent/jobs/job_runner_options.h"
#include "agent/jobs/rank_logs.h"
#include "agent/launch/mpi_launch.h"
#include "agent/sandbox/cgroup.h"
#include "agent/sandbox/sandbox.h"
#include "agent/sandbox/spawn.h"
#include "api/agent_protocol.h"
#include "common/status.h"

namespace agent {

class JobLauncher {
 public:
  // Every argument must outlive the launcher; `records` is where Spawn rewrites the job's record.
  JobLauncher(const JobRunnerOptions& options, RankLogs* logs, UidPool& uids,
              const JobRecords& records)
      : options_(options), logs_(logs), uids_(uids), records_(records) {}

  struct Planned {
    LaunchInput in;
    LaunchPlan plan;
    std::optional<JobCredentials> creds;  // none: the job runs as the agent
    CgroupLimits limits;
  };
  // Runner's lock held. Gives `job` its uid and GPUs and plans its launch; the error's message
  // is the job's end reason (exit code 1), after Release gives back what was taken.
  common::Result<Planned> Plan(HeldJob* job, const api::Command& launch);

  struct Spawned {
    pid_t pid = 0;
    int exit_code = 0;  // with error: the job's end
    std::string error;  // empty when the launcher runs
  };
  // Without the runner's lock, `job` marked preparing: the job's directories, its cgroup, the
  // launcher process, its watcher and record. On error, Release gives back what was taken.
  Spawned Spawn(HeldJob* job, const api::Command& launch, Planned planned);

  // Runner's lock held. Gives back the job's uid, GPUs and cgroup.
  void Release(HeldJob* job);

 private:
  // Prepares the job's directories; the start note opens its launcher log.
  common::Status PrepareDirs(HeldJob* job, const api::Command& launch, const LaunchPlan& plan,
                             const std::optional<JobCredentials>& creds);

  const JobRunnerOptions& options_;
  RankLogs* const logs_;
  UidPool& uids_;
  const JobRecords& records_;
};

}  // namespace agent
