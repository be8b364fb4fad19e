// A job this node holds, as the job runner (job_runner.h) and its parts see it: from its launch
// (or a kill of a job unknown here, or its record after a restart) until the server has
// acknowledged its end.
//
// A plain struct with no lock of its own. The runner's mutex guards it, except where a part says
// otherwise: while `preparing` is set, the preparer thread (job_preparer.h) and the launcher's
// slow half (JobLauncher::Spawn) touch the job without it; while the job runs, its waiter
// (JobReaper::Reap) alone touches `uid` and `cgroup`.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/data/dataset_import.h"
#include "agent/images/image_cache.h"
#include "agent/jobs/job_record.h"
#include "agent/jobs/job_watcher.h"
#include "agent/sandbox/cgroup.h"
#include "agent/sandbox/job_processes.h"
#include "agent/sandbox/process_tree.h"
#include "api/agent_protocol.h"
#include "common/status.h"

namespace agent {

struct HeldJob {
  int64_t id = 0;
  int attempt = 0;
  bool from_launch = false;  // false: a kill of a job unknown here, recorded to be reported
  std::string tenant;
  std::string token;
  pid_t pid = 0;
  std::optional<uid_t> uid;  // the job's own uid while it runs
  bool network_granted = false;  // `uid` has its network rules (JobSandboxOptions::network)
  std::vector<int> gpus;
  std::unique_ptr<JobCgroup> cgroup;
  std::optional<ImportPaths> import;  // kind import: where its output goes
  std::string upload_fetched;         // an uploaded import's copy, as fetched (root's)
  std::string upload_copy;            // ... and where the job reads it, in its own directory
  std::unique_ptr<ImageUse> image;    // an image job's unpacked image, held while it runs
  int64_t memory_limit_bytes = 0;     // of the cgroup, for the finish reason
  bool running = false;
  bool ended = false;      // the runner's Finish was called: `result` holds how
  bool preparing = false;  // fetching its inputs or starting; nothing runs yet
  bool kill_requested = false;
  std::string kill_reason;
  std::vector<ProcessId> kill_snapshot;   // the tree as it was when the kill started
  std::optional<JobProcesses> processes;  // where its processes are, once started
  std::unique_ptr<JobWatcher> watcher;    // stops them if this agent process goes
  api::FinishedJob result;
  // When the launch arrived (steady clock), and where its time went since (api::LaunchTimings);
  // unset for a job this runner did not get a launch for (a reconciled one).
  std::optional<std::chrono::steady_clock::time_point> received;
  api::LaunchTimings timings;
  std::thread waiter;
  std::thread killer;
  std::thread preparer;
};

// Milliseconds from the job's launch to now, into `*phase` (kept as is without a launch time).
void MarkPhase(const HeldJob& job, int64_t* phase);

// Writes the job's record (agent/jobs/job_record.h): what it is, where its processes are, how it
// ended. Launches held only: a job recorded only to report a kill has none.
common::Status SaveJobRecord(const JobRecords& records, const HeldJob& job);

// Joins whichever of the job's preparer, waiter and killer threads it has.
void JoinThreads(HeldJob* job);

}  // namespace agent
