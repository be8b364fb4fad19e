// Jobs as tenants see them: submit (validated completely, stored in one transaction, honouring
// an idempotency key), list, get, cancel, events, and the log files of a job.
//
// Every call is scoped to the caller's tenant unless the caller is a cluster-admin; a job of
// another tenant is reported as not found, never as forbidden.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/job_spec.h"
#include "api/v1/evaluation.h"
#include "controlplane/service/job_fit.h"
#include "controlplane/service/job_view.h"
#include "controlplane/service/metrics_history.h"
#include "controlplane/service/store.h"

namespace controlplane::service {

using Clock = std::function<int64_t()>;  // epoch milliseconds

struct SubmitResult {
  JobView job;
  bool created = false;  // false: an earlier submission with the same idempotency key
};

// Group commit of submissions (submit_batcher.h). window_us 0: each submission is its own
// transaction (a batch of one), written on the caller's thread.
struct SubmitBatchOptions {
  // How long a batch waits for more after its first member arrives, when submissions have
  // lately been concurrent (a lone submitter's never waits).
  int window_us = 0;
  int max_size = 256;  // a batch closes at this many members
  // false: every batch waits its window, even a lone submitter's (tests that need to know
  // which members share a batch).
  bool skip_window_when_alone = true;
  // Called with each batch's number of members once it is answered (the server's metrics).
  std::function<void(int)> observe_batch;
  // The highest priority a member or tenant-admin may give a job where its tenant's
  // quota.max_priority is not set (--default-max-priority); cluster-admins are not bounded.
  int default_max_priority = 100;
};

// What the batcher has done since the service started.
struct SubmitBatchStats {
  int64_t batches = 0;         // transactions committed (a member retried alone: one more)
  int64_t members = 0;         // submissions answered
  int64_t failed_batches = 0;  // batches of several that failed and were retried member by member
};

class SubmitBatcher;

struct JobPage {
  std::vector<JobView> jobs;
  std::optional<std::string> next_cursor;
};

struct LogSnapshot {
  bool terminal = false;
  int attempt = 0;  // whose logs these are
  std::vector<LogRecord> logs;  // of that attempt, by rank
};

class JobsService {
 public:
  // `wake` nudges the scheduler after a submit (once per batch with `batch`).
  JobsService(Database& db, api::SpecLimits limits, Clock now, std::function<void()> wake,
              SubmitBatchOptions batch = {});
  ~JobsService();
  JobsService(JobsService&&) noexcept;

  Result<SubmitResult> Submit(const Principal& p, const std::string& body,
                              const std::string& idempotency_key);
  Result<JobView> Get(const Principal& p, int64_t id);
  const api::SpecLimits& limits() const { return limits_; }
  SubmitBatchStats batch_stats() const;
  // `tenant_id` > 0 narrows a cluster-admin's list to one tenant; `name_contains` filters by
  // name (case-insensitive substring).
  Result<JobPage> List(const Principal& p, int limit, const std::string& cursor,
                       const std::string& state, int64_t tenant_id = 0,
                       const std::string& name_contains = "");
  Result<JobView> Cancel(const Principal& p, int64_t id);
  Result<std::vector<EventRecord>> Events(const Principal& p, int64_t id, int64_t after_id,
                                          const std::string& type, int limit);
  // The log files of one attempt of the job now, and whether the job has ended (for follow=1).
  // No `attempt`: the job's latest attempt that has logs (its current one when none has).
  // invalid_argument for an attempt the job has not reached.
  Result<LogSnapshot> Logs(const Principal& p, int64_t id, std::optional<int> attempt = {});
  // The job's step series, downsampled (metrics_history.h): {"series": {...}}.
  Result<nlohmann::json> Metrics(const Principal& p, int64_t id, const MetricsRequest& req);
  // Kind eval's results per task (evaluations.h); another tenant's job is not found.
  Result<api::v1::Evaluation> Evaluation(const Principal& p, int64_t id);

 private:
  Database& db_;
  const api::SpecLimits limits_;
  Clock now_;
  std::function<void()> wake_;
  // Every submission's write path, batched or (window 0) alone on the caller's thread.
  std::unique_ptr<SubmitBatcher> batcher_;
};

// The pieces of a submission that Submit, the batcher and tests share.
// The row an insert of `spec` for `p` writes.
NewJob NewJobOf(const Principal& p, const api::JobSpec& spec, const std::string& digest,
                const std::string& idempotency_key, int64_t now_ms);
// The row a successful insert of `nj` stored, as a read of it would return it.
JobRecord NewJobRecord(const NewJob& nj, int64_t id, const std::string& tenant_name);
// `existing` holds the key: the answer for a request whose body has `digest` (the same body
// replays it; another one is already_exists).
Result<JobRecord> ReplayOf(JobRecord existing, const std::string& digest);
// The data of a new job's first state event.
nlohmann::json SubmittedEvent(const Principal& p);

// Asks `job` to stop, inside `uow`, as `actor`: a pending job is cancelled at once, a placed or
// running one becomes CANCELLING (its agent kills it); cancelling twice is once.
// failed_precondition when it has already ended.
Status RequestCancel(UnitOfWork& uow, JobRecord& job, const std::string& actor, int64_t now_ms);

// Members and above change jobs; viewers and above read them; machine credentials do neither.
Status RequireWriter(const Principal& p);
Status RequireReader(const Principal& p);

// Whether a tenant may submit a job of these resources now: 422 (unprocessable) for a job that
// can never run (job_fit.h: past a per-job quota, or larger than the registered nodes could
// ever hold), 429 (resource_exhausted) when its pending-jobs quota is full (`pending_jobs`: the
// tenant's jobs waiting now; only looked at when the tenant has that quota). Slot and
// running-job quotas that are merely full make the job wait instead (the scheduler says why).
// Whether `p` may give a job of `tenant` this priority: up to its quota.max_priority, or
// `default_max` where that is not set; a cluster-admin any.
Status CheckPriority(const Principal& p, const TenantRecord& tenant, int priority,
                     int default_max);
Status CheckAdmission(const TenantRecord& tenant, int64_t pending_jobs, const NodeSizes& nodes,
                      const api::Resources& r);

}  // namespace controlplane::service
