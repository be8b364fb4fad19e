// The submission batcher's thread and its one transaction per batch (submit_batcher.h).
#include "controlplane/service/submit_batcher.h"

#include <algorithm>
#include <exception>
#include <map>
#include <utility>

#include "common/log.h"
#include "controlplane/service/checkpoints_service.h"
#include "controlplane/service/dataset_lifecycle.h"
#include "controlplane/service/dataset_store.h"
#include "controlplane/service/evaluations.h"
#include "controlplane/service/job_fit.h"

namespace controlplane::service {

SubmitBatcher::SubmitBatcher(Database& db, SubmitBatchOptions options, Clock now,
                             std::function<void()> wake)
    : db_(db),
      options_{std::max(options.window_us, 0), std::max(options.max_size, 1),
               options.skip_window_when_alone, std::move(options.observe_batch),
               std::clamp(options.default_max_priority, 0, 100)},
      now_(std::move(now)),
      wake_(std::move(wake)) {
  if (options_.window_us > 0) thread_ = std::thread([this] { Run(); });
}

SubmitBatcher::~SubmitBatcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Result<SubmitResult> SubmitBatcher::Submit(PreparedSubmit s) {
  Member m{std::move(s), std::chrono::steady_clock::now(), {}};
  auto answer = m.answer.get_future();
  if (!thread_.joinable()) {
    // Window 0: a batch of one, on this thread. Its audit row is the one any unit of work
    // committing on this thread writes (AuditedDatabase), so it is not drafted here.
    m.s.audit = nullptr;
    Write({&m});
    return answer.get();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return common::Unavailable("server shutting down");
    queue_.push_back(&m);
    peak_ = std::max(peak_, queue_.size() + writing_);
    // The thread waits for a first member, then for the window or a full batch: only those
    // two events need it awake.
    if (queue_.size() == 1 || queue_.size() >= static_cast<size_t>(options_.max_size)) {
      cv_.notify_one();
    }
  }
  return answer.get();
}

SubmitBatchStats SubmitBatcher::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void SubmitBatcher::Run() {
  const auto window = std::chrono::microseconds(options_.window_us);
  const size_t max_size = static_cast<size_t>(options_.max_size);
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) break;
    // Waiting pays only when others submit meanwhile: not when every submission since the last
    // batch was taken arrived with nothing else queued or being written (one submitter, whose
    // every submission would otherwise wait the whole window). The window runs from the first
    // member's arrival: members that queued while the previous batch was being written have
    // waited already and go at once.
    if (peak_ > 1 || !options_.skip_window_when_alone) {
      cv_.wait_until(lock, queue_.front()->arrived + window,
                     [&] { return stop_ || queue_.size() >= max_size; });
      if (stop_) break;
    }
    const size_t n = std::min(queue_.size(), max_size);
    std::vector<Member*> batch(queue_.begin(), queue_.begin() + static_cast<long>(n));
    queue_.erase(queue_.begin(), queue_.begin() + static_cast<long>(n));
    writing_ = n;
    peak_ = n + queue_.size();
    lock.unlock();
    Write(batch);
    lock.lock();
  }
  for (Member* m : queue_) m->answer.set_value(common::Unavailable("server shutting down"));
  queue_.clear();
}

SubmitBatcher::Outcome SubmitBatcher::AttemptRacing(
    const std::vector<Member*>& batch, std::vector<std::optional<Result<SubmitResult>>>* answers) {
  // What a handler's exception would be on the request's thread (the router's 500), without
  // ending this thread and every later submission with it; the unit of work rolls back.
  auto attempt = [&]() -> Outcome {
    try {
      return Attempt(batch, answers);
    } catch (const std::exception& e) {
      common::LogError("submission batch threw", {{"error", e.what()}});
      return {common::Internal("internal error"), true};
    }
  };
  Outcome out = attempt();
  if (batch.size() == 1 && out.began && out.status.code() == common::Code::kAlreadyExists) {
    // Its key was taken by a submission that committed meanwhile (the insert waited for it):
    // once more, and the member replays that job as a lone submission would.
    out = attempt();
  }
  return out;
}

void SubmitBatcher::Write(const std::vector<Member*>& batch) {
  std::vector<std::optional<Result<SubmitResult>>> answers;
  const Outcome whole = AttemptRacing(batch, &answers);
  int64_t committed = whole.status.ok() ? 1 : 0;
  const bool retried = !whole.status.ok() && whole.began && batch.size() > 1;
  if (retried) {
    // Something in the batch failed its transaction: every member again, alone.
    answers.assign(batch.size(), std::nullopt);
    for (size_t i = 0; i < batch.size(); ++i) {
      std::vector<std::optional<Result<SubmitResult>>> one;
      const Outcome alone = AttemptRacing({batch[i]}, &one);
      if (alone.status.ok()) {
        ++committed;
        answers[i] = std::move(one[0]);
      } else if (!alone.began) {
        // The database went away meanwhile: the rest would only wait for the same answer.
        for (size_t j = i; j < batch.size(); ++j) answers[j] = Result<SubmitResult>(alone.status);
        break;
      } else {
        answers[i] = Result<SubmitResult>(alone.status);
      }
    }
  } else if (!whole.status.ok()) {
    // No transaction at all (the database is out of reach), or the only member failed: each
    // member gets what a lone submission would have.
    answers.assign(batch.size(), Result<SubmitResult>(whole.status));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.batches += committed;
    stats_.members += static_cast<int64_t>(batch.size());
    if (retried) ++stats_.failed_batches;
    // Before the answers: a member's next submission must not find its own batch still counted.
    writing_ = 0;
  }
  if (options_.observe_batch) options_.observe_batch(static_cast<int>(batch.size()));
  for (size_t i = 0; i < batch.size(); ++i) batch[i]->answer.set_value(std::move(*answers[i]));
}

SubmitBatcher::Outcome SubmitBatcher::Attempt(
    const std::vector<Member*>& batch, std::vector<std::optional<Result<SubmitResult>>>* answers) {
  answers->assign(batch.size(), std::nullopt);
  auto begun = db_.Begin();
  if (!begun.ok()) return {begun.status(), false};
  UnitOfWork& uow = **begun;
  // Any failed statement ends the attempt: the transaction is aborted, and a COMMIT would only
  // roll it back (PostgreSQL says so without an error).
  auto failed = [](Status st) { return Outcome{std::move(st), true}; };

  // Admission serialises per tenant on its row, as a lone submission's does; locked in id order
  // so two batches (or a batch and a tenant update) cannot deadlock.
  std::map<int64_t, std::optional<TenantRecord>> tenants;
  for (const Member* m : batch) tenants[m->s.principal.tenant_id];
  for (auto& [id, record] : tenants) {
    auto t = uow.tenants().GetTenant(id, /*for_update=*/true);
    if (!t.ok()) return failed(t.status());
    record = std::move(*t);
  }
  auto shapes = uow.nodes().Shapes();
  if (!shapes.ok()) return failed(shapes.status());
  const NodeSizes sizes(*shapes);

  // First every member's admission, in arrival order, with what the earlier ones left: each
  // tenant's pending jobs are read once and counted on (the job store writes one pending upsert
  // per tenant at COMMIT).
  struct Insert {
    size_t member;
    NewJob job;
    std::vector<DatasetRecord> datasets;  // the versions the job reads
  };
  std::vector<Insert> inserts;
  std::map<int64_t, int64_t> pending;
  // (tenant, key) → the insert of this batch that takes it; later members with it replay it.
  std::map<std::pair<int64_t, std::string>, size_t> keyed;
  // Members with the key of an earlier insert of this batch: replays of it (or, for another
  // body, already_exists). Index into `inserts`.
  std::vector<std::optional<size_t>> replay_of(batch.size());
  const int64_t now = now_();
  for (size_t i = 0; i < batch.size(); ++i) {
    const PreparedSubmit& s = batch[i]->s;
    const Principal& p = s.principal;
    auto& answer = (*answers)[i];
    if (!s.idempotency_key.empty()) {
      auto first = keyed.find({p.tenant_id, s.idempotency_key});
      if (first != keyed.end()) {
        replay_of[i] = first->second;  // answered once its job has an id
        continue;
      }
      auto existing = uow.jobs().GetByIdempotencyKey(p.tenant_id, s.idempotency_key);
      if (!existing.ok()) return failed(existing.status());
      if (*existing) {
        auto same = ReplayOf(std::move(**existing), s.digest);
        if (!same.ok()) {
          answer = Result<SubmitResult>(same.status());
          continue;
        }
        auto view = LoadJobView(uow, std::move(*same));
        if (!view.ok()) return failed(view.status());
        answer = SubmitResult{std::move(*view), false};
        continue;
      }
    }
    const std::optional<TenantRecord>& tenant = tenants[p.tenant_id];
    if (!tenant) {
      answer = Result<SubmitResult>(
          common::NotFound("tenant " + std::to_string(p.tenant_id) + " not found"));
      continue;
    }
    int64_t pending_now = 0;
    if (tenant->quota.pending_jobs) {
      auto known = pending.find(p.tenant_id);
      if (known == pending.end()) {
        auto n = uow.jobs().PendingCount(p.tenant_id);
        if (!n.ok()) return failed(n.status());
        known = pending.emplace(p.tenant_id, *n).first;
      }
      pending_now = known->second;
    }
    if (Status st = CheckPriority(p, *tenant, s.spec.priority, options_.default_max_priority);
        !st.ok()) {
      answer = Result<SubmitResult>(st);
      continue;
    }
    if (Status st = CheckAdmission(*tenant, pending_now, sizes, s.spec.resources); !st.ok()) {
      answer = Result<SubmitResult>(st);
      continue;
    }
    // From here each step reads: its refusal fails the batch, and the member then gets it
    // alone (an eval checkpoint, init_from or dataset that is not there).
    api::JobSpec spec = s.spec;
    if (Status st = ResolveEvalCheckpoint(uow, p.tenant_id, &spec); !st.ok()) return failed(st);
    if (spec.init_from > 0) {
      if (Status st = CheckInitFrom(uow, p.tenant_id, spec.init_from); !st.ok()) {
        return failed(st);
      }
    }
    auto dataset = ResolveDataset(uow, p.tenant_id, spec);
    if (!dataset.ok()) return failed(dataset.status());
    auto reads = ResolveCommandDatasets(uow, p.tenant_id, spec);
    if (!reads.ok()) return failed(reads.status());
    if (*dataset) reads->push_back(std::move(**dataset));
    if (tenant->quota.pending_jobs) ++pending[p.tenant_id];
    if (!s.idempotency_key.empty()) keyed[{p.tenant_id, s.idempotency_key}] = inserts.size();
    inserts.push_back({i, NewJobOf(p, spec, s.digest, s.idempotency_key, now), std::move(*reads)});
  }

  // Then the admitted members' rows, a statement per table for all of them.
  std::vector<NewJob> jobs;
  for (const Insert& in : inserts) jobs.push_back(in.job);
  // already_exists: a lone submission or another server took a key meanwhile; the member, alone,
  // then replays its job.
  auto ids = uow.jobs().InsertMany(jobs);
  if (!ids.ok()) return failed(ids.status());
  std::vector<EventRecord> events;
  std::vector<AuditRecord> rows;
  std::vector<size_t> audited;  // the member of each row
  std::vector<JobView> views(inserts.size());
  for (size_t k = 0; k < inserts.size(); ++k) {
    const Insert& in = inserts[k];
    const int64_t id = (*ids)[k];
    const Principal& p = batch[in.member]->s.principal;
    events.push_back({0, id, now, "state", SubmittedEvent(p)});
    for (const DatasetRecord& d : in.datasets) {
      if (Status st = uow.datasets().BindJob(id, d.id); !st.ok()) return failed(st);
    }
    if (AuditScope* scope = batch[in.member]->s.audit) {
      if (auto row = scope->DraftFor("job " + std::to_string(id), p.tenant_id)) {
        rows.push_back(std::move(*row));
        audited.push_back(in.member);
      }
    } else {
      // Alone on the caller's thread: the scope open there (if any) writes the row at commit.
      AuditScope::NoteTarget("job " + std::to_string(id), p.tenant_id);
    }
    views[k].job = NewJobRecord(in.job, id, tenants[p.tenant_id]->name);
    (*answers)[in.member] = SubmitResult{views[k], true};
  }
  if (Status st = uow.events().AppendMany(events); !st.ok()) return failed(st);
  auto row_ids = uow.audit().AppendMany(rows);
  if (!row_ids.ok()) return failed(row_ids.status());
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!replay_of[i]) continue;
    const JobView& first = views[*replay_of[i]];
    auto same = ReplayOf(first.job, batch[i]->s.digest);
    (*answers)[i] = same.ok() ? Result<SubmitResult>(SubmitResult{first, false})
                              : Result<SubmitResult>(same.status());
  }
  if (Status st = uow.Commit(); !st.ok()) return failed(st);
  for (size_t r = 0; r < rows.size(); ++r) {
    rows[r].id = (*row_ids)[r];
    batch[audited[r]]->s.audit->MarkWritten(std::move(rows[r]));
  }
  if (!inserts.empty() && wake_) wake_();
  return {Status::Ok(), true};
}

}  // namespace controlplane::service
