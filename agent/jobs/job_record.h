// What the agent has on its disk about each job it holds, so that a restarted agent knows what
// the one before it was doing: <data-dir>/running/job-<id>.json (root's, 0600), written when a
// launch is taken, rewritten when the job's processes start and when it ends, and removed once
// the server has acknowledged its end.
//
// Reconciliation at start (JobRunner::Reconcile) reads them all: a job that had ended is reported
// again as it ended (the server may not have heard); a job that was held or running is stopped,
// whatever of it is left (agent/sandbox/job_processes.h), its watcher included, and reported lost,
// so the server restarts it; and the launch of that attempt is held, so a repeat of it from the
// server starts nothing twice. See agent/jobs/job_watcher.h for why survivors are not adopted.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/sandbox/job_processes.h"
#include "api/agent_protocol.h"
#include "common/status.h"

namespace agent {

struct JobRecord {
  int64_t job_id = 0;
  int attempt = 0;
  std::string tenant;
  std::optional<JobProcesses> processes;  // once something was started
  ProcessId watcher;                      // pid 0: none
  std::optional<api::FinishedJob> finished;  // ended, not yet acknowledged by the server
};

class JobRecords {
 public:
  // `dir` is created (0700) on first Save.
  explicit JobRecords(std::string dir) : dir_(std::move(dir)) {}
  common::Status Save(const JobRecord& r) const;
  void Remove(int64_t job_id) const;
  // Every readable record; one that cannot be parsed is logged, removed and skipped.
  std::vector<JobRecord> LoadAll() const;
  std::string PathFor(int64_t job_id) const;

 private:
  std::string dir_;
};

}  // namespace agent
