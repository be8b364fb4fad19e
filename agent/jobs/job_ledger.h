// The jobs a node's JobRunner holds (job_runner.h), and what the server is told of them: which
// launches are held (the acknowledgement of their launch commands), which jobs run, which ended
// and are not yet acknowledged. Each job's record on disk (agent/jobs/job_record.h) lets a
// restarted agent take over: ReconciledJob turns a record an earlier agent left into a held job,
// and PruneJobDirs removes the directories of jobs no one holds any more.
//
// A job leaves the ledger only when the server acknowledged its end; the ids of the last
// kRememberAcknowledged of those are kept, so a late duplicate kill of one is ignored rather than
// reported again.
//
// Not thread-safe: the runner calls every method with its mutex held. records() is the exception:
// JobRecords reads and writes files only, and the runner uses it with or without the lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "agent/jobs/held_job.h"
#include "agent/jobs/job_record.h"
#include "agent/jobs/job_sandbox_options.h"
#include "agent/sandbox/sandbox.h"
#include "api/agent_protocol.h"

namespace agent {

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

class JobLedger {
 public:
  static constexpr size_t kRememberAcknowledged = 1024;

  // `records_dir`: where the jobs' records live (<data-dir>/running).
  explicit JobLedger(std::string records_dir);

  const JobRecords& records() const { return records_; }

  // The job held under `job_id`, or null.
  HeldJob* Find(int64_t job_id) const;
  // Holds `job` under its id (replacing none: the caller looked first). Returns it.
  HeldJob* Add(std::unique_ptr<HeldJob> job);
  // A new launch of `job_id`: a kill of it is no longer a late duplicate.
  void ForgetAcknowledged(int64_t job_id);
  // Whether the server acknowledged the end of `job_id` lately (see above).
  bool WasAcknowledged(int64_t job_id) const;

  std::vector<int64_t> Running() const;
  bool AnyRunning() const;
  std::set<int64_t> Held() const;
  // Every launch held: running, preparing, or ended and not yet acknowledged.
  std::vector<api::LaunchAck> HeldLaunches() const;
  // Running jobs whose launcher has started.
  std::vector<RunningJob> RunningJobs() const;
  // The ended jobs, as the next heartbeat reports them (their reported_ms phase set to now).
  std::vector<api::FinishedJob> Unreported() const;
  // Ended jobs among `job_ids` leave the ledger and their records are removed; running or
  // unknown ones are skipped. The caller joins the returned jobs' threads without the lock.
  std::vector<std::unique_ptr<HeldJob>> TakeAcknowledged(const std::vector<int64_t>& job_ids);
  // Every job, for the runner's destructor.
  std::map<int64_t, std::unique_ptr<HeldJob>> TakeAll();

 private:
  const JobRecords records_;
  std::map<int64_t, std::unique_ptr<HeldJob>> jobs_;
  std::deque<int64_t> recently_acknowledged_;
};

// Without the runner's lock: the held job for a record an earlier agent process left. A job that
// had ended is reported as it ended (the server may not have heard); one that was held or running
// has its watcher and every process left of it stopped (after `jobs.kill_grace`), its directories
// locked and its download removed, and is reported lost.
std::unique_ptr<HeldJob> ReconciledJob(const JobRecord& record, const JobSandboxOptions& jobs,
                                       UidPool* uids);

// Retention: removes <data-dir>/{jobs,logs,checkpoints,downloads}/job-<id> of every job not in
// `held`, untouched for `max_age` (never through a link). Returns how many were removed.
int PruneJobDirs(const std::string& data_dir, const std::set<int64_t>& held,
                 std::chrono::seconds max_age);

}  // namespace agent
