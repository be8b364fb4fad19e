// JobRunner: starts jobs under mpirun, waits for them, kills them, and remembers how they ended
// until the server has heard it.
//
// A launch carrying a blob-store checkpoint (api::Command::resume_checkpoint) is fetched first on
// a preparer thread, so heartbeats go on meanwhile; the job counts as running (and can be killed)
// from the launch on, and starts from the downloaded file (EMBODY_RESUME_FROM).
//
// Launch never fails to the caller: a job that cannot start is recorded as finished with a reason
// (exit code 1 for a launch the agent refuses, 127 when mpirun cannot be executed). Each job has a
// waiter thread (waitpid on mpirun) and, once killed, a killer thread (SIGTERM to the whole tree,
// SIGKILL after the grace period). When mpirun exits, anything left of its tree, of its cgroup and
// of its uid is SIGKILLed before the job is reported finished, so a finished job never leaves
// orphans behind.
//
// Every job runs in the sandbox of agent/sandbox/sandbox.h: its own uid (from the UidPool) with
// its tenant's group as its one supplementary group (a tenant past the range is refused), a clean
// environment (agent/launch/mpi_launch.h), its private directory, rlimits, a cgroup where the node
// has them (agent/sandbox/cgroup.h), and on a node with GPUs the GPUs the agent gave it
// (CUDA_VISIBLE_DEVICES: distinct from those of the node's other running jobs; none for a cpu
// job).
//
// Finished jobs stay listed by Unreported() until Acknowledge() (after a heartbeat carrying them
// succeeded). Thread-safe.
//
// The runner is the coordinator: it holds one mutex over every job's state (held_job.h) and makes
// each change of it, and calls four parts for the work between the changes, each without the
// lock unless it says so: the preparer (job_preparer.h: images, checkpoints, uploads and pulls
// before a start), the launcher (job_launcher.h: uid, GPUs and limits under the lock, then the
// directories, cgroup and mpirun without it), the reaper (job_reaper.h: the end of mpirun and
// the kill's signals) and the ledger (job_ledger.h: the jobs held, their records, what is
// reported and acknowledged; always under the lock).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/jobs/held_job.h"
#include "agent/jobs/job_launcher.h"
#include "agent/jobs/job_ledger.h"
#include "agent/jobs/job_preparer.h"
#include "agent/jobs/job_reaper.h"
#include "agent/jobs/job_runner_options.h"
#include "agent/jobs/rank_logs.h"
#include "agent/sandbox/sandbox.h"
#include "api/agent_protocol.h"

namespace agent {

class JobRunner {
 public:
  static constexpr const char* kCancelReason = "killed on cancel";

  // `logs` must outlive the runner; every launched job is tracked there.
  JobRunner(JobRunnerOptions options, RankLogs* logs);
  ~JobRunner();  // kills what still runs and waits for it
  JobRunner(const JobRunner&) = delete;
  JobRunner& operator=(const JobRunner&) = delete;

  // A launch of a job this node holds (running, preparing, or ended and not yet acknowledged) is
  // a no-op: the server repeats launches until they are acknowledged.
  void Launch(const api::Command& launch);
  // Idempotent. A job unknown to this node is reported finished at once, so a server that lost
  // track of it can still complete its cancellation.
  void Kill(int64_t job_id, const std::string& reason = kCancelReason);
  // Once, before the first launch: takes over what an earlier agent process on this data
  // directory left (agent/jobs/job_record.h). Jobs that had ended are reported as they ended;
  // jobs held or running are stopped, every process left of them, and reported lost. Returns how
  // many jobs were found.
  int Reconcile();
  // Retention: removes the directories (jobs/, logs/, checkpoints/, downloads/ job-<id>) of jobs
  // this runner no longer holds, untouched for `max_age`. Returns how many were removed.
  int PruneFinishedDirs(std::chrono::seconds max_age);
  // Kills every running job (reason given) and returns when all have ended.
  void KillAllAndWait(const std::string& reason);

  std::vector<int64_t> Running() const;
  // Every launch held: running, preparing, or ended and not yet acknowledged. The heartbeat lists
  // them as the acknowledgement of their launch commands.
  std::vector<api::LaunchAck> HeldLaunches() const;
  std::vector<RunningJob> RunningJobs() const;
  std::vector<api::FinishedJob> Unreported() const;
  void Acknowledge(const std::vector<int64_t>& job_ids);
  std::optional<JobIdentity> Identity(int64_t job_id) const;  // running jobs only

  // Called (on the waiter thread) when a job has ended; e.g. to drop its metrics.
  void SetOnFinish(std::function<void(int64_t job_id)> fn);

  // For tests and diagnostics.
  pid_t LauncherPid(int64_t job_id) const;
  std::string JobDir(int64_t job_id) const;  // <data-dir>/jobs/job-<id>
  std::string LogDir(int64_t job_id) const;  // <data-dir>/logs/job-<id>
  // Where a launch's resume_checkpoint is downloaded: <data-dir>/downloads/job-<id>
  std::string DownloadDir(int64_t job_id) const;
  std::vector<int> GpusInUse() const;
  std::optional<api::FinishedJob> WaitFinished(int64_t job_id, std::chrono::milliseconds timeout);

 private:
  // Plans the job's start (uid, GPUs, limits) under `lock` (held on entry and on return), then
  // releases it while the launcher spawns mpirun, and starts the job's waiter.
  void Start(HeldJob* job, const api::Command& launch, std::unique_lock<std::mutex>& lock);
  // On the preparer thread: fetches what the preparer's NeedsFetch wants, then starts the job (or
  // records why not).
  void FetchThenStart(HeldJob* job, api::Command launch);
  // On the preparer thread: unpacks (or finds) the job's image in the node's cache and holds it,
  // waits for the other nodes' copies, then fetches what NeedsFetch wants, then starts the job
  // (or records why not).
  void PrepareImageThenStart(HeldJob* job, api::Command launch, const ImageRef& image);
  void Finish(HeldJob* job, int exit_code, const std::string& reason);  // mu_ held
  // The waiter thread: reaps the job, then finishes it.
  void Wait(HeldJob* job);
  // The killer thread: SIGTERM, the grace, then SIGKILL to what still runs.
  void KillTree(HeldJob* job);
  // Whether the job was killed meanwhile, for a preparer's long wait to poll (takes mu_).
  std::function<bool()> KillRequestedOf(HeldJob* job);

  const JobRunnerOptions options_;
  RankLogs* const logs_;
  JobLedger ledger_;  // guarded by mu_ (its records() excepted)
  UidPool own_uids_;
  UidPool& uids_;
  JobPreparer preparer_;
  JobLauncher launcher_;
  JobReaper reaper_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::function<void(int64_t)> on_finish_;
};

}  // namespace agent
