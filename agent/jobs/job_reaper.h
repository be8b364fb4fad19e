// The end of a job this node heads (job_runner.h): the waiter's reaping once the launcher exits,
// and a kill's two halves. Each function is the slow part, run without the runner's lock; the
// runner holds the lock for what they hand over (the kill's snapshot of the tree, the wait for
// the job's end between SIGTERM and SIGKILL, the job's Finish).
//
// When mpirun exits, anything left of its tree, of its cgroup and of its uid is SIGKILLed before
// the job is reported finished, so a finished job never leaves orphans behind. Thread-safe: it
// reads only its options, and touches the job it is given as held_job.h allows its waiter.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "agent/jobs/held_job.h"
#include "agent/jobs/job_runner_options.h"
#include "agent/jobs/rank_logs.h"
#include "agent/sandbox/process_tree.h"
#include "agent/sandbox/sandbox.h"

namespace agent {

// "exited with code 3", "killed by signal 9"; exit code 128+N for signal N.
struct ExitDescription {
  int exit_code = 0;
  std::string reason;
};
ExitDescription DescribeWaitStatus(int wait_status);

class JobReaper {
 public:
  // Every argument must outlive the reaper.
  JobReaper(const JobRunnerOptions& options, RankLogs* logs, UidPool& uids)
      : options_(options), logs_(logs), uids_(uids) {}

  // On the job's waiter thread: waits for its launcher to exit, kills whatever is left of the
  // job (its cgroup's members, or its tree and what `kill_snapshot` found, then every process of
  // its uid), reaps the launcher, collects its last log bytes, locks its directories, removes its
  // download and publishes (or discards) an import. Returns how the job ended; a killed job's
  // reason is the runner's. `kill_snapshot` returns the tree a kill found (under the lock).
  ExitDescription Reap(HeldJob* job,
                       const std::function<std::vector<ProcessId>()>& kill_snapshot) const;

  // A kill's first half: the job's tree now (mpirun leads its session, its ranks sit in process
  // groups of their own within it).
  static std::vector<ProcessId> Tree(const HeldJob& job);
  // SIGTERM to the ranks of `tree`, not to mpirun (to mpirun when it is all there is).
  void Terminate(const HeldJob& job, const std::vector<ProcessId>& tree) const;
  // A kill's second half, when the grace has passed and the job still runs: SIGKILL to its tree
  // now and to what is left of `tree`. What left the tree dies when mpirun has exited (Reap).
  void KillSurvivors(const HeldJob& job, const std::vector<ProcessId>& tree) const;

 private:
  const JobRunnerOptions& options_;
  RankLogs* const logs_;
  UidPool& uids_;
};

}  // namespace agent
