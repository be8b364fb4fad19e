// History retention: the logs and events of jobs that finished long ago do not stay forever.
// A job finished more than `max_age_ms` ago loses its log files (every attempt's) and every event
// but its state changes; the job row and its transitions (who, when, why) stay, as do its
// checkpoints, which have their own retention. A sweep handles a bounded number of jobs, each in
// its own transaction, so it never holds locks long and picks up where it stopped.
//
// The audit log and the daily usage totals have retentions of their own (PruneRecords): rows
// older than theirs are deleted, a bounded number per sweep.
#pragma once

#include <cstdint>
#include <functional>

#include "controlplane/service/log_files.h"
#include "controlplane/service/store.h"

namespace controlplane::service {

class HistoryRetention {
 public:
  HistoryRetention(Database& db, const LogFiles& files, std::function<int64_t()> clock,
                   int64_t max_age_ms, int jobs_per_sweep = 100)
      : db_(db),
        files_(files),
        clock_(std::move(clock)),
        max_age_ms_(max_age_ms),
        jobs_per_sweep_(jobs_per_sweep) {}

  // One sweep; returns how many jobs' history was pruned.
  Result<int> Sweep();

 private:
  Database& db_;
  const LogFiles& files_;
  std::function<int64_t()> clock_;
  const int64_t max_age_ms_;
  const int jobs_per_sweep_;
};

struct RecordRetention {
  int64_t audit_max_age_ms = 0;  // 0: kept forever
  int64_t usage_max_age_ms = 0;  // 0: kept forever
  int rows_per_sweep = 10'000;
};

// One sweep of the audit log and usage_daily; returns the rows deleted.
Result<int64_t> PruneRecords(Database& db, int64_t now_ms, const RecordRetention& r);

}  // namespace controlplane::service
