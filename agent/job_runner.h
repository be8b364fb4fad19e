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
// Every job runs in the sandbox of agent/sandbox.h: its own uid (from the UidPool) with its
// tenant's group as its one supplementary group (a tenant past the range is refused), a clean
// environment (agent/mpi_launch.h), its private directory, rlimits, a cgroup where the node has
// them (agent/cgroup.h), and on a node with GPUs the GPUs the agent gave it (CUDA_VISIBLE_DEVICES:
// distinct from those of the node's other running jobs; none for a cpu job).
//
// Finished jobs stay listed by Unreported() until Acknowledge() (after a heartbeat carrying them
// succeeded). Thread-safe.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/cgroup.h"
#include "agent/dataset_import.h"
#include "agent/dataset_upload_fetch.h"
#include "agent/job_record.h"
#include "agent/gpu_pool.h"
#include "agent/image_cache.h"
#include "agent/job_sandbox_options.h"
#include "agent/job_watcher.h"
#include "agent/mpi_launch.h"
#include "agent/process_tree.h"
#include "agent/rank_logs.h"
#include "agent/sandbox.h"
#include "api/agent_protocol.h"

namespace agent {

struct JobRunnerOptions {
  // What this node's job launches share with its rsh bridge (agent/job_sandbox_options.h).
  JobSandboxOptions jobs;
  std::string agent_url;     // EMBODY_AGENT_URL given to the ranks
  std::string embody_data;   // embody-data path (import jobs)
  std::string dataset_root;  // where import jobs publish datasets; "" : imports are refused
  // How long a job's processes outlive this agent process before its watcher stops them
  // (agent/job_watcher.h). No watcher when jobs.rank_exec (the agent binary) is empty.
  std::chrono::milliseconds orphan_grace{3000};
  // The node's GPUs, shared with the rsh bridge (daemons of jobs headed elsewhere take theirs
  // from the same pool); null or empty: a node without GPUs.
  std::shared_ptr<GpuPool> gpus;
  // Writes a blob-store checkpoint (api::Command::resume_checkpoint) to a local path, verified;
  // unset: launches ignore resume_checkpoint.
  std::function<common::Status(const api::CheckpointRef&, const std::string& local_path)>
      fetch_checkpoint;
  // Writes the upload an import job reads (dataset_upload_fetch.h) to a local path, verified;
  // unset: such a job fails at once.
  std::function<common::Status(const UploadRef&, const std::string& local_path)> fetch_upload;
  // The uid pool to share with the node's rsh bridge (agent/rsh_bridge.h), so no uid serves two
  // jobs; null: the runner's own.
  UidPool* uid_pool = nullptr;
  // Where image jobs' images are unpacked (agent/image_cache.h); null: such jobs fail, saying
  // so. container_init: embody-container-init, PID 1 of their containers; crun: the runtime.
  ImageCache* images = nullptr;
  std::string container_init;
  std::string crun = "crun";
};

// What the job-local API needs to know about a running job.
struct JobIdentity {
  std::string token;
  std::string tenant;
};

// A running job's launcher: mpirun, leader of the session its ranks live in.
struct RunningJob {
  int64_t job_id = 0;
  std::string tenant;
  pid_t launcher_pid = 0;
};

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
  // directory left (agent/job_record.h). Jobs that had ended are reported as they ended; jobs
  // held or running are stopped, every process left of them, and reported lost. Returns how
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
  struct Job {
    int64_t id = 0;
    int attempt = 0;
    bool from_launch = false;  // false: a kill of a job unknown here, recorded to be reported
    std::string tenant;
    std::string token;
    pid_t pid = 0;
    std::optional<uid_t> uid;  // the job's own uid while it runs
    std::vector<int> gpus;
    std::unique_ptr<JobCgroup> cgroup;
    std::optional<ImportPaths> import;  // kind import: where its output goes
    std::string upload_fetched;  // an uploaded import's copy, as fetched (root's)
    std::string upload_copy;     // ... and where the job reads it, in its own directory
    std::unique_ptr<ImageUse> image;  // an image job's unpacked image, held while it runs
    int64_t memory_limit_bytes = 0;  // of the cgroup, for the finish reason
    bool running = false;
    bool ended = false;      // Finish() was called: `result` holds how
    bool preparing = false;  // fetching its checkpoint; nothing started yet
    bool kill_requested = false;
    std::string kill_reason;
    std::vector<ProcessId> kill_snapshot;  // the tree as it was when the kill started
    std::optional<JobProcesses> processes;   // where its processes are, once started
    std::unique_ptr<JobWatcher> watcher;     // stops them if this agent process goes
    api::FinishedJob result;
    // When the launch arrived (steady clock), and where its time went since (api::LaunchTimings);
    // unset for a job this runner did not get a launch for (a reconciled one).
    std::optional<std::chrono::steady_clock::time_point> received;
    api::LaunchTimings timings;
    std::thread waiter;
    std::thread killer;
    std::thread preparer;
  };

  // Decides the job's uid, GPUs and limits under `lock` (held on entry and on return), then
  // releases it for SpawnJob.
  void Start(Job* job, const api::Command& launch, std::unique_lock<std::mutex>& lock);
  struct SpawnResult {
    pid_t pid = 0;
    int exit_code = 0;   // with error: the job's end
    std::string error;   // empty when mpirun runs
  };
  // The slow part of a start, without the runner's lock: the job's directories, its cgroup,
  // mpirun, its watcher and record. Touches only `job`, which is marked preparing meanwhile.
  SpawnResult SpawnJob(Job* job, const api::Command& launch, LaunchInput in, LaunchPlan plan,
                       const std::optional<JobCredentials>& creds, const CgroupLimits& limits);
  // Whether the launch needs its resume_checkpoint fetched first: not when the job's own
  // checkpoint at resume_from is readable here and at least as new.
  bool NeedsFetch(const api::Command& launch) const;
  // On the preparer thread: fetches the checkpoint, then starts the job (or records why not).
  void FetchThenStart(Job* job, api::Command launch);
  // On the preparer thread: unpacks (or finds) the job's image in the node's cache and holds it,
  // then fetches what NeedsFetch wants, then starts the job (or records why not).
  void PrepareImageThenStart(Job* job, api::Command launch, const ImageRef& image);
  // On the preparer thread: fetches an import's upload, then starts the job reading the copy.
  void FetchUploadThenStart(Job* job, api::Command launch, const UploadRef& ref);
  // mu_ held. Prepares the job's directories; the start note opens its launcher log.
  common::Status PrepareDirs(Job* job, const api::Command& launch, const LaunchPlan& plan,
                             const std::optional<JobCredentials>& creds);
  void Finish(Job* job, int exit_code, const std::string& reason);  // mu_ held
  // mu_ held. Writes the job's record (agent/job_record.h); launches held only.
  common::Status SaveRecord(const Job& job) const;
  void ReleaseResources(Job* job);                                  // mu_ held
  void Wait(Job* job);
  void KillTree(Job* job);
  static void JoinThreads(Job* job);
  // Milliseconds from the job's launch to now, into `*phase` (kept as is without a launch time).
  static void MarkPhase(const Job& job, int64_t* phase);

  const JobRunnerOptions options_;
  RankLogs* const logs_;
  const JobRecords records_;
  UidPool own_uids_;
  UidPool& uids_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::map<int64_t, std::unique_ptr<Job>> jobs_;
  std::deque<int64_t> recently_acknowledged_;  // to ignore late duplicate kills
  std::function<void(int64_t)> on_finish_;
};

// "exited with code 3", "killed by signal 9"; exit code 128+N for signal N.
struct ExitDescription {
  int exit_code = 0;
  std::string reason;
};
ExitDescription DescribeWaitStatus(int wait_status);

}  // namespace agent
