// The submission batcher on the in-memory twin (label unit): concurrent submissions land as one
// batch with the answers lone submissions get; a member over its quota, a replayed key and a
// member whose write fails are each answered as alone while the others still land; the audit
// row of each created job is written in the batch's transaction.
//
// A batch is made deterministic by a long window and a batch size equal to the number of
// submitting threads: the batch closes when the last one arrives, so every test knows exactly
// which members shared it (stats().batches says so).
#include "controlplane/service/submit_batcher.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "controlplane/service/audit_scope.h"
#include "controlplane/testing/memory_service_fixture.h"

namespace controlplane::service {
namespace {

using common::Code;

class SubmitBatcherTest : public testing::TwoTenantServiceTest {
 protected:
  struct Call {
    Principal p;
    std::string body;
    std::string key;
  };

  // A JobsService whose batches close at `size` members (or after 10 s).
  std::unique_ptr<JobsService> Batched(int size, Database* db = nullptr) {
    return std::make_unique<JobsService>(db ? *db : db_, api::SpecLimits{}, clock(),
                                         [this] { ++wakes_; },
                                         SubmitBatchOptions{10'000'000, size, false, {}});
  }

  // Every call on a thread of its own, all at once; answers in the order of `calls`.
  static std::vector<Result<SubmitResult>> SubmitAll(JobsService& jobs,
                                                     const std::vector<Call>& calls) {
    std::vector<std::optional<Result<SubmitResult>>> out(calls.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < calls.size(); ++i) {
      threads.emplace_back([&, i] { out[i] = jobs.Submit(calls[i].p, calls[i].body, calls[i].key); });
    }
    for (auto& t : threads) t.join();
    std::vector<Result<SubmitResult>> answers;
    for (auto& o : out) answers.push_back(std::move(*o));
    return answers;
  }

  std::atomic<int> wakes_{0};
};

TEST_F(SubmitBatcherTest, ConcurrentSubmissionsLandAsOneBatchWithTheirOwnAnswers) {
  constexpr int kN = 12;
  auto jobs = Batched(kN);
  std::vector<Call> calls;
  for (int i = 0; i < kN; ++i) {
    calls.push_back({i % 3 == 0 ? other_ : member_, Spec("job-" + std::to_string(i)), ""});
  }
  auto answers = SubmitAll(*jobs, calls);
  std::set<int64_t> ids;
  for (int i = 0; i < kN; ++i) {
    ASSERT_TRUE(answers[i].ok()) << answers[i].status().ToString();
    const JobRecord& j = answers[i]->job.job;
    EXPECT_TRUE(answers[i]->created);
    EXPECT_EQ(j.name, "job-" + std::to_string(i));  // each caller gets its own job
    EXPECT_EQ(j.tenant, i % 3 == 0 ? "b" : "a");
    EXPECT_EQ(j.token_id, calls[i].p.token_id);
    // The answer is the stored row, and its first state event is there with its actor.
    const JobRecord stored = JobRow(j.id);
    EXPECT_EQ(stored.name, j.name);
    EXPECT_EQ(stored.tenant_id, j.tenant_id);
    EXPECT_EQ(stored.created_ms, j.created_ms);
    auto events = EventsOf(j.id, "state");
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].data["actor"], calls[i].p.tenant + "/" + calls[i].p.token_name);
    ids.insert(j.id);
  }
  EXPECT_EQ(ids.size(), static_cast<size_t>(kN));
  EXPECT_EQ(CountJobs(), kN);
  // One transaction and one scheduler wake for all of them.
  EXPECT_EQ(jobs->batch_stats().batches, 1);
  EXPECT_EQ(jobs->batch_stats().members, kN);
  EXPECT_EQ(wakes_.load(), 1);
  // The pending counts the batch kept per tenant are those a lone submission would see.
  auto uow = Begin();
  EXPECT_EQ(*uow->jobs().PendingCount(a_), 8);
  EXPECT_EQ(*uow->jobs().PendingCount(b_), 4);
}

TEST_F(SubmitBatcherTest, AMemberOverItsPendingQuotaIsRefusedWhileTheOthersLand) {
  const int64_t c = AddTenant("c", Quota{std::nullopt, std::nullopt, 2, std::nullopt});
  const Principal limited = AddPerson(c, "member");
  auto jobs = Batched(7);
  std::vector<Call> calls;
  for (int i = 0; i < 5; ++i) calls.push_back({limited, Spec("c-" + std::to_string(i)), ""});
  calls.push_back({member_, Spec("a-free"), ""});
  calls.push_back({member_, Spec("a-never", 1, 9), ""});  // larger than any node: 422
  auto answers = SubmitAll(*jobs, calls);
  int landed = 0, refused = 0;
  for (int i = 0; i < 5; ++i) {
    if (answers[i].ok()) {
      ++landed;
    } else {
      ++refused;
      EXPECT_EQ(answers[i].status().code(), Code::kResourceExhausted);  // 429
      EXPECT_EQ(answers[i].status().field(), "quota.pending_jobs");
    }
  }
  // Judged member by member: exactly the quota's worth lands, whichever arrived first.
  EXPECT_EQ(landed, 2);
  EXPECT_EQ(refused, 3);
  ASSERT_TRUE(answers[5].ok()) << answers[5].status().ToString();
  EXPECT_EQ(answers[6].status().code(), Code::kUnprocessable);
  EXPECT_EQ(CountJobs(), 3);
  EXPECT_EQ(jobs->batch_stats().batches, 1);
  EXPECT_EQ(jobs->batch_stats().failed_batches, 0);
  auto uow = Begin();
  EXPECT_EQ(*uow->jobs().PendingCount(c), 2);
}

TEST_F(SubmitBatcherTest, TheSameKeyTwiceInOneBatchReplaysTheFirstAndAKeyCommittedBeforeToo) {
  auto jobs = Batched(4);
  // Three members with one key and one body, and one without a key: one job for the key.
  std::vector<Call> calls = {{member_, Spec("keyed"), "k-1"},
                             {member_, Spec("keyed"), "k-1"},
                             {member_, Spec("keyed"), "k-1"},
                             {member_, Spec("plain"), ""}};
  auto answers = SubmitAll(*jobs, calls);
  std::set<int64_t> keyed_ids;
  int created = 0;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(answers[i].ok()) << answers[i].status().ToString();
    keyed_ids.insert(answers[i]->job.job.id);
    created += answers[i]->created ? 1 : 0;
  }
  EXPECT_EQ(keyed_ids.size(), 1u);
  EXPECT_EQ(created, 1);
  ASSERT_TRUE(answers[3].ok());
  EXPECT_EQ(CountJobs(), 2);
  EXPECT_EQ(jobs->batch_stats().batches, 1);
  const int64_t k1 = *keyed_ids.begin();
  EXPECT_EQ(EventsOf(k1, "state").size(), 1u);

  // Next batch: k-1 again (committed: replayed), k-1 with another body (a conflict), and k-2
  // twice with different bodies (the first to arrive wins, the other is a conflict).
  calls = {{member_, Spec("keyed"), "k-1"},
           {member_, Spec("other-body"), "k-1"},
           {member_, Spec("k2-a"), "k-2"},
           {member_, Spec("k2-b"), "k-2"}};
  answers = SubmitAll(*jobs, calls);
  ASSERT_TRUE(answers[0].ok()) << answers[0].status().ToString();
  EXPECT_FALSE(answers[0]->created);
  EXPECT_EQ(answers[0]->job.job.id, k1);
  EXPECT_EQ(answers[1].status().code(), Code::kAlreadyExists);
  EXPECT_EQ(answers[1].status().field(), "Idempotency-Key");
  EXPECT_NE(answers[2].ok(), answers[3].ok());
  const auto& lost = answers[2].ok() ? answers[3] : answers[2];
  EXPECT_EQ(lost.status().code(), Code::kAlreadyExists);
  EXPECT_EQ(CountJobs(), 3);
}

TEST_F(SubmitBatcherTest, AMemberWhoseWriteFailsIsRetriedAloneAndTheOthersLand) {
  auto jobs = Batched(5);
  std::vector<Call> calls;
  for (int i = 0; i < 4; ++i) calls.push_back({member_, Spec("good-" + std::to_string(i)), ""});
  // A dataset the tenant does not have: found out by a read in the batch's transaction, which
  // the batch then gives up (nothing of it written) and every member is tried alone.
  calls.push_back({member_,
                   R"({"name":"bad","kind":"train","resources":{"nodes":1},
                       "engine":{"data":{"dataset":"dataset:missing"}}})",
                   ""});
  auto answers = SubmitAll(*jobs, calls);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(answers[i].ok()) << answers[i].status().ToString();
    EXPECT_TRUE(answers[i]->created);
    EXPECT_EQ(EventsOf(answers[i]->job.job.id, "state").size(), 1u);  // written once
  }
  ASSERT_FALSE(answers[4].ok());
  EXPECT_EQ(answers[4].status().code(), Code::kUnprocessable);
  EXPECT_EQ(answers[4].status().field(), "engine.data.dataset");
  EXPECT_EQ(CountJobs(), 4);
  // The batch failed as a whole, then five transactions of one, four of which committed.
  EXPECT_EQ(jobs->batch_stats().failed_batches, 1);
  EXPECT_EQ(jobs->batch_stats().batches, 4);
}

TEST_F(SubmitBatcherTest, EachCreatedJobsAuditRowIsWrittenInTheBatch) {
  AuditedDatabase audited(db_);
  auto jobs = Batched(3, &audited);
  std::vector<std::optional<AuditRecord>> written(3);
  std::vector<int64_t> job_ids(3);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      AuditScope scope([&, i](const AuditScope& s) {
        AuditRecord r;
        r.method = "POST";
        r.route = "/v1/jobs";
        r.request_id = "req-" + std::to_string(i);
        r.target = s.noted_target();
        r.target_tenant_id = s.noted_target_tenant();
        r.status = 201;
        r.outcome = "ok";
        return r;
      });
      auto r = jobs->Submit(member_, Spec("audited-" + std::to_string(i)), "");
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      job_ids[i] = r->job.job.id;
      written[i] = scope.written();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(jobs->batch_stats().batches, 1);
  auto uow = Begin();
  AuditQuery q;
  auto rows = *uow->audit().List(q);
  ASSERT_EQ(rows.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(written[i]) << "no row handed back to member " << i;
    EXPECT_EQ(written[i]->target, "job " + std::to_string(job_ids[i]));
    EXPECT_EQ(written[i]->target_tenant_id, a_);
    EXPECT_EQ(written[i]->request_id, "req-" + std::to_string(i));
    bool stored = false;
    for (const AuditRecord& r : rows) stored = stored || (r.id == written[i]->id &&
                                                          r.target == written[i]->target);
    EXPECT_TRUE(stored) << "member " << i;
  }
}

// Window 0: each submission is a batch of one on the caller's thread, its audit row written once
// by the unit of work that commits there, naming the job.
TEST_F(SubmitBatcherTest, WithWindowZeroEachSubmissionIsABatchOfOneWithOneAuditRow) {
  AuditedDatabase audited(db_);
  JobsService jobs(audited, api::SpecLimits{}, clock(), [this] { ++wakes_; });
  for (int i = 0; i < 2; ++i) {
    AuditScope scope([](const AuditScope& s) {
      AuditRecord r;
      r.method = "POST";
      r.route = "/v1/jobs";
      r.target = s.noted_target();
      r.target_tenant_id = s.noted_target_tenant();
      r.status = 201;
      return r;
    });
    auto r = jobs.Submit(member_, Spec("alone-" + std::to_string(i)), "");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(scope.written());
    EXPECT_EQ(scope.written()->target, "job " + std::to_string(r->job.job.id));
    EXPECT_EQ(scope.written()->target_tenant_id, a_);
  }
  EXPECT_EQ(jobs.batch_stats().batches, 2);
  EXPECT_EQ(jobs.batch_stats().members, 2);
  EXPECT_EQ(wakes_.load(), 2);
  auto uow = Begin();
  EXPECT_EQ(uow->audit().List(AuditQuery{})->size(), 2u);
}

// A lone submitter's batch does not wait for the window (here 10 s): nothing else is coming.
TEST_F(SubmitBatcherTest, ALoneSubmitterDoesNotWaitForTheWindow) {
  std::vector<int> observed;
  std::mutex mu;
  SubmitBatchOptions o{10'000'000, 256};
  o.observe_batch = [&](int n) {
    std::lock_guard<std::mutex> lock(mu);
    observed.push_back(n);
  };
  JobsService jobs(db_, api::SpecLimits{}, clock(), nullptr, o);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(jobs.Submit(member_, Spec("solo-" + std::to_string(i)), "").ok());
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(jobs.batch_stats().batches, 3);
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(observed, (std::vector<int>{1, 1, 1}));
}

// A database whose transactions open only once `expected` submitters have entered Submit (or
// after 5 s): the first submission, written alone on its thread, is still being written when the
// others arrive, however late a loaded machine starts their threads.
class WaitForSubmitters : public Database {
 public:
  WaitForSubmitters(Database& db, int expected) : db_(db), expected_(expected) {}
  void Entered() {
    std::lock_guard<std::mutex> lock(mu_);
    ++entered_;
    cv_.notify_all();
  }
  Result<std::unique_ptr<UnitOfWork>> Begin() override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(5), [&] { return entered_ >= expected_; });
    lock.unlock();
    return db_.Begin();
  }

 private:
  Database& db_;
  const int expected_;
  std::mutex mu_;
  std::condition_variable cv_;
  int entered_ = 0;
};

// Once submissions overlap, a batch waits its window for the others: eight at once land in two
// batches (the first, written alone before the rest had arrived, and the rest up to the batch
// size), or in a few more where a loaded machine starts a thread after a batch was taken; never
// one each.
TEST_F(SubmitBatcherTest, ConcurrentSubmittersStillShareBatches) {
  constexpr int kN = 8;
  WaitForSubmitters gated(db_, kN);
  JobsService jobs(gated, api::SpecLimits{}, clock(), nullptr, SubmitBatchOptions{300'000, 7});
  std::vector<std::optional<Result<SubmitResult>>> out(kN);
  std::vector<std::thread> threads;
  for (int i = 0; i < kN; ++i) {
    threads.emplace_back([&, i] {
      gated.Entered();
      out[i] = jobs.Submit(member_, Spec("c-" + std::to_string(i)), "");
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& a : out) ASSERT_TRUE(a->ok()) << a->status().ToString();
  EXPECT_EQ(jobs.batch_stats().members, kN);
  EXPECT_GE(jobs.batch_stats().batches, 2);  // at most 7 to a batch
  EXPECT_LE(jobs.batch_stats().batches, 4);
}

// A database that cannot be reached: no transaction opens.
class UnreachableDatabase : public Database {
 public:
  Result<std::unique_ptr<UnitOfWork>> Begin() override {
    ++begins;
    return common::Unavailable("database unavailable (cannot connect)");
  }
  std::atomic<int> begins{0};
};

TEST_F(SubmitBatcherTest, WithoutTheDatabaseEveryMemberGetsTheSameUnavailable) {
  UnreachableDatabase down;
  auto jobs = Batched(4, &down);
  std::vector<Call> calls;
  for (int i = 0; i < 4; ++i) calls.push_back({member_, Spec("down-" + std::to_string(i)), ""});
  auto answers = SubmitAll(*jobs, calls);
  for (const auto& a : answers) {
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.status().code(), Code::kUnavailable);  // 503 with its retry hint
    EXPECT_EQ(a.status().message(), "database unavailable (cannot connect)");
  }
  // One try for the batch, not one more per member.
  EXPECT_EQ(down.begins.load(), 1);
  EXPECT_EQ(jobs->batch_stats().batches, 0);
  EXPECT_EQ(wakes_.load(), 0);
}

TEST_F(SubmitBatcherTest, RefusalsBeforeTheBatchAreAnsweredOnTheCallersThread) {
  auto jobs = Batched(1);
  // Validation and roles are the handler's, as without batching: nothing waits for a batch.
  EXPECT_EQ(jobs->Submit(member_, "{\"name\": 3}", "").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(jobs->Submit(AddPerson(a_, "viewer"), Spec("v"), "").status().code(),
            Code::kPermissionDenied);
  EXPECT_EQ(CountJobs(), 0);
  EXPECT_EQ(wakes_.load(), 0);
}

}  // namespace
}  // namespace controlplane::service
