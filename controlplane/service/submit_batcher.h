// The submission batcher (group commit) behind POST /v1/jobs: submissions that arrive together
// are written in one transaction and answered after its one COMMIT.
//
// Why: a submission is durable when its COMMIT's WAL flush is, and one tenant's submissions
// serialise on its row lock (taken for admission) through that flush, so with one transaction
// per submission throughput is bound by flushes, not CPU (docs/benchmarks.md, "Submissions per
// second at the issue's goal"). Here the handler thread validates and authorises as before
// (JobsService::Submit), then hands the prepared submission over and waits; one thread collects
// what arrives within `window_us` of the first waiting member (or up to `max_size`; no wait when
// nothing else was submitted since the last batch was taken: a lone submitter), and writes
// the batch: tenant rows locked FOR UPDATE in tenant-id order, the node sizes read once, each
// tenant's pending count read once and the pending upsert written once per tenant (the job
// store's per-unit bookkeeping), then per member in arrival order exactly what a lone submission
// does (idempotency key, admission, eval checkpoint, init_from, dataset, job row, first state
// event, audit row), one COMMIT, one scheduler wake.
//
// With window 0 there is no thread: each submission is a batch of one written on the caller's
// thread, so this is the one write path of POST /v1/jobs.
//
// What a caller sees is what a lone submission gives it:
// - Admission is judged member by member in arrival order with the counts the earlier members
//   left, so a member over its pending quota gets its 429 and the others land.
// - Idempotency keys: a key committed earlier replays its job; a second member of the batch
//   with the key of an earlier one replays that one's job (created=false), or gets
//   already_exists for a different body.
// - The audit row of each created job is written in the batch's transaction (AuditScope's
//   hand-off), so it stays atomic with the job; refusals and replays get the router's own row.
// - A member that fails in a way that touches the database (a failed statement aborts the whole
//   transaction, and PostgreSQL answers COMMIT of an aborted one with a rollback, not an
//   error) fails the batch: nothing of it is written, and every member is retried alone, each
//   in its own transaction, so one bad member cannot fail the others. Refusals decided without
//   the database (quota, a job that can never run, a replay's different body) are answered
//   inside the batch. When the database cannot be reached at all (Begin fails), every waiting
//   member gets that same unavailable status (503 with its retry hint), as a lone one would.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "api/job_spec.h"
#include "controlplane/service/audit_scope.h"
#include "controlplane/service/jobs_service.h"

namespace controlplane::service {

// One validated, authorised submission, as JobsService::Submit hands it over.
struct PreparedSubmit {
  Principal principal;
  api::JobSpec spec;
  std::string digest;           // of the body, when it came with an idempotency key
  std::string idempotency_key;  // "" : none
  AuditScope* audit = nullptr;  // the handler thread's open scope (AuditScope::HandedOff)
};

class SubmitBatcher {
 public:
  // `wake` nudges the scheduler once per committed batch that created a job.
  SubmitBatcher(Database& db, SubmitBatchOptions options, Clock now, std::function<void()> wake);
  // Answers members still waiting with unavailable and stops the thread.
  ~SubmitBatcher();
  SubmitBatcher(const SubmitBatcher&) = delete;
  SubmitBatcher& operator=(const SubmitBatcher&) = delete;

  // Blocks until the submission's batch has committed (or it was refused) and returns what a
  // lone JobsService::Submit would have.
  Result<SubmitResult> Submit(PreparedSubmit s);
  SubmitBatchStats stats() const;

 private:
  struct Member {
    PreparedSubmit s;
    std::chrono::steady_clock::time_point arrived;
    std::promise<Result<SubmitResult>> answer;
  };
  // How an attempt ended: `began` false when no transaction could be opened.
  struct Outcome {
    Status status;
    bool began = false;
  };

  void Run();
  void Write(const std::vector<Member*>& batch);
  // Writes `batch` in one transaction; on success fills `answers` (one per member) and has
  // committed. On failure nothing was written and `answers` means nothing.
  Outcome Attempt(const std::vector<Member*>& batch,
                  std::vector<std::optional<Result<SubmitResult>>>* answers);
  // Attempt, and for a batch of one that lost its idempotency key to a concurrent commit, once
  // more (it then replays the winner's job).
  Outcome AttemptRacing(const std::vector<Member*>& batch,
                        std::vector<std::optional<Result<SubmitResult>>>* answers);

  Database& db_;
  const SubmitBatchOptions options_;
  Clock now_;
  std::function<void()> wake_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Member*> queue_;  // waiting, in arrival order; owned by their Submit calls
  bool stop_ = false;
  SubmitBatchStats stats_;
  size_t writing_ = 0;  // members of the batch being written
  // The most submissions queued or being written at once since the last batch was taken: more
  // than one, and the next batch waits for its window.
  size_t peak_ = 0;
  std::thread thread_;  // last: starts once everything above is built; none with window 0
};

}  // namespace controlplane::service
