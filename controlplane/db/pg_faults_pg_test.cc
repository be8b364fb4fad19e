// What the control plane's PostgreSQL layer does when the database misbehaves (label pg): the
// pool replaces connections the server closed, a unit of work whose connection dies fails as
// unavailable and leaves nothing behind, statement and lock timeouts answer unavailable, and
// the scheduler's leadership is fenced: a leader whose lock session was killed and replaced
// commits nothing more. The whole server under a PostgreSQL restart is
// controlplane/http/pg_restart_pg_test.cc.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "controlplane/db/leader_lock.h"
#include "controlplane/db/stores.h"
#include "controlplane/service/auth.h"
#include "controlplane/service/jobs_service.h"
#include "controlplane/service/leader_fence.h"
#include "controlplane/service/log_files.h"
#include "controlplane/service/node_service.h"
#include "controlplane/service/scheduler_loop.h"
#include "controlplane/testing/pg_database_fixture.h"

namespace controlplane {
namespace {

using api::JobState;
using common::Code;

class PgFaultsTest : public testing::PgDatabaseTest {
 protected:
  void SetUp() override { OpenFreshDatabase("faults"); }

  // Terminates the backends of this test's database that `where` selects from pg_stat_activity
  // (psql's own excluded); returns how many.
  int Terminate(const std::string& where) {
    auto r = pg_->Psql(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE pid <> "
        "pg_backend_pid() AND datname = '" + DatabaseName() + "' AND (" + where + ")");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::stoi(*r) : 0;
  }

  // The fresh database of this test (the pool's), not the cluster's own that psql uses.
  std::string DatabaseName() {
    auto lease = pool_->Acquire();
    EXPECT_TRUE(lease.ok());
    auto r = db::Exec(lease->get(), "SELECT current_database() AS d");
    EXPECT_TRUE(r.ok());
    return r.ok() ? r->Str(0, "d") : "";
  }

  int64_t CountJobs() {
    auto uow = database_->Begin();
    EXPECT_TRUE(uow.ok());
    auto jobs = (*uow)->jobs().List(service::JobQuery{});
    EXPECT_TRUE(jobs.ok());
    return jobs.ok() ? static_cast<int64_t>(jobs->size()) : -1;
  }

  int64_t AddTenant() {
    auto uow = database_->Begin();
    EXPECT_TRUE(uow.ok());
    service::TenantRecord t;
    t.name = "t";
    auto id = (*uow)->tenants().CreateTenant(t, now_.load());
    EXPECT_TRUE(id.ok() && (*uow)->Commit().ok());
    return id.ok() ? *id : 0;
  }

  service::NewJob Job(int64_t tenant, const std::string& name) {
    service::NewJob j;
    j.tenant_id = tenant;
    j.name = name;
    j.kind = "command";
    j.spec = {{"name", name}};
    j.now_ms = now_.load();
    return j;
  }
};

// Every pooled connection killed while idle (a restart looks the same to the pool): the next
// units of work still succeed, on new connections, without an error reaching the caller.
TEST_F(PgFaultsTest, PoolReplacesConnectionsTheServerClosed) {
  {
    // Open all four connections of the fixture's pool.
    std::vector<std::unique_ptr<service::UnitOfWork>> open;
    for (int i = 0; i < 4; ++i) {
      auto uow = database_->Begin();
      ASSERT_TRUE(uow.ok()) << uow.status().ToString();
      open.push_back(std::move(uow.value()));
    }
  }
  EXPECT_EQ(Terminate("application_name = 'embody-server'"), 4);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const uint64_t errors_before = pool_->Stats().errors;
  for (int i = 0; i < 10; ++i) {
    auto uow = database_->Begin();
    ASSERT_TRUE(uow.ok()) << i << ": " << uow.status().ToString();
    auto n = (*uow)->tenants().CountTenants();
    ASSERT_TRUE(n.ok()) << i << ": " << n.status().ToString();
    ASSERT_TRUE((*uow)->Commit().ok());
  }
  // The broken connections were found and counted, not handed to a caller.
  EXPECT_GT(pool_->Stats().errors, errors_before);
  EXPECT_LE(pool_->Stats().in_use, 0);
}

// A unit of work whose connection dies before COMMIT: unavailable (503 at the API), and none of
// its writes exist afterwards.
TEST_F(PgFaultsTest, UnitOfWorkOnAKilledConnectionIsUnavailableAndWritesNothing) {
  const int64_t tenant = AddTenant();
  auto uow = database_->Begin();
  ASSERT_TRUE(uow.ok());
  auto id = (*uow)->jobs().Insert(Job(tenant, "half"));
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  ASSERT_TRUE((*uow)->events().Append(*id, now_.load(), "state", {{"to", "PENDING"}}).ok());
  ASSERT_EQ(Terminate("state = 'idle in transaction'"), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto more = (*uow)->events().Append(*id, now_.load(), "state", {{"to", "PENDING"}});
  EXPECT_EQ(more.status().code(), Code::kUnavailable) << more.status().ToString();
  common::Status committed = (*uow)->Commit();
  EXPECT_EQ(committed.code(), Code::kUnavailable) << committed.ToString();
  EXPECT_EQ(committed.message().rfind(db::kDatabaseUnavailable, 0), 0u) << committed.ToString();
  uow->reset();
  EXPECT_EQ(CountJobs(), 0);
}

// PostgreSQL answers COMMIT of a transaction an earlier statement aborted with ROLLBACK and no
// error: the commit must fail, not report the half-done unit of work as written.
TEST_F(PgFaultsTest, CommitOfAnAbortedTransactionIsAnError) {
  const int64_t tenant = AddTenant();
  auto tx = db::PgTx::Begin(*pool_);
  ASSERT_TRUE(tx.ok());
  db::PendingDeltas pending;
  db::PgJobStore jobs(**tx, pending);
  ASSERT_TRUE(jobs.Insert(Job(tenant, "lost")).ok());
  auto bad = (*tx)->Exec("SELECT 1 / $1::int AS x", {db::P(0)});
  ASSERT_FALSE(bad.ok());
  const uint64_t errors = pool_->Stats().errors;
  common::Status committed = (*tx)->Commit();
  EXPECT_EQ(committed.code(), Code::kInternal) << committed.ToString();
  EXPECT_NE(committed.message().find("rolled back"), std::string::npos) << committed.ToString();
  EXPECT_GT(pool_->Stats().errors, errors);
  tx->reset();
  EXPECT_EQ(CountJobs(), 0);
  // The connection goes back to the pool usable: the next unit of work commits.
  auto again = database_->Begin();
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE((*again)->jobs().Insert(Job(tenant, "kept")).ok());
  EXPECT_TRUE((*again)->Commit().ok());
  again->reset();
  EXPECT_EQ(CountJobs(), 1);
}

TEST_F(PgFaultsTest, StatementAndLockTimeoutsAreUnavailable) {
  db::PgOptions o;
  o.statement_timeout_ms = 200;
  o.lock_timeout_ms = 200;
  auto pool = db::PgPool::Open(pg_->conninfo(), 2, o);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  {
    auto tx = db::PgTx::Begin(**pool);
    ASSERT_TRUE(tx.ok());
    auto slow = (*tx)->Exec("SELECT pg_sleep(2)");
    EXPECT_EQ(slow.status().code(), Code::kUnavailable) << slow.status().ToString();
  }
  ASSERT_TRUE(pg_->Psql("CREATE TABLE IF NOT EXISTS lock_probe (id int PRIMARY KEY); "
                        "INSERT INTO lock_probe VALUES (1) ON CONFLICT DO NOTHING")
                  .ok());
  auto holder = db::PgTx::Begin(**pool);
  ASSERT_TRUE(holder.ok());
  ASSERT_TRUE((*holder)->Exec("SELECT id FROM lock_probe WHERE id = 1 FOR UPDATE").ok());
  auto waiter = db::PgTx::Begin(**pool);
  ASSERT_TRUE(waiter.ok());
  const auto start = std::chrono::steady_clock::now();
  auto blocked = (*waiter)->Exec("SELECT id FROM lock_probe WHERE id = 1 FOR UPDATE");
  EXPECT_EQ(blocked.status().code(), Code::kUnavailable) << blocked.status().ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

// Nothing listens: unavailable (the server's start fails with it; a running pool answers 503).
TEST_F(PgFaultsTest, UnreachableDatabaseIsUnavailable) {
  const int port = embody::testing::FreeLoopbackPort();
  auto none = db::PgPool::Open("host=127.0.0.1 port=" + std::to_string(port) + " user=embody",
                               2);
  EXPECT_EQ(none.status().code(), Code::kUnavailable);
}

class LeaderFenceTest : public PgFaultsTest {
 protected:
  // Kills the session holding the scheduler's advisory lock, as a network fault or an
  // operator would; the lock is released with it.
  void KillLeaderSession() {
    auto r = pg_->Psql(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_locks WHERE locktype = 'advisory' "
        "AND objid = 7361000 AND granted AND database = (SELECT oid FROM pg_database WHERE "
        "datname = '" + DatabaseName() + "')");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(*r, "1\n");
  }

  // `lock`'s leadership, waiting (bounded) for a killed session's lock to be released.
  static std::optional<int64_t> AcquireWithin(db::LeaderLock& lock, double seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
      if (auto e = lock.TryAcquire()) return e;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return std::nullopt;
  }
};

// Two schedulers; the first loses its lock session while it has a decision to write, the
// second takes over: the first's cycle commits nothing, the second's places the job.
TEST_F(LeaderFenceTest, DeposedLeaderCommitsNothing) {
  // Each test has a database of its own, and advisory locks are per database.
  db::LeaderLock first(*pool_, "first"), second(*pool_, "second");
  const std::optional<int64_t> first_epoch = first.TryAcquire();
  ASSERT_TRUE(first_epoch.has_value());
  EXPECT_FALSE(second.TryAcquire().has_value());

  // A job that fits a registered node: any cycle that runs places it.
  service::LogFiles files(data_dir_);
  auto clock = [this] { return now_.load(); };
  service::NodeService nodes(*database_, files, 1000, clock, nullptr);
  service::Principal join;
  join.tenant_id = AddTenant();
  join.tenant = "t";
  join.role = "agent";
  join.token_name = "join";
  ASSERT_TRUE(nodes.Register(join, {"node-a", "127.0.0.1", "http://127.0.0.1:1", 2, 0, {}}).ok());
  service::Principal member = join;
  member.role = "member";
  service::JobsService jobs(*database_, api::SpecLimits{}, clock, nullptr);
  auto submitted =
      jobs.Submit(member, R"({"name":"j","kind":"command","command":["true"],"resources":{"ranks_per_node":1}})", "");
  ASSERT_TRUE(submitted.ok()) << submitted.status().ToString();
  const int64_t job = submitted->job.job.id;

  KillLeaderSession();
  const std::optional<int64_t> second_epoch = AcquireWithin(second, 10);
  ASSERT_TRUE(second_epoch.has_value());
  EXPECT_GT(*second_epoch, *first_epoch);

  // The first replica has not looked at its lock since: its cycle still carries its epoch.
  service::SchedulerLoop first_loop(*database_, {}, clock, nullptr, nullptr);
  common::Status st = first_loop.RunOnce(nullptr, first_epoch);
  EXPECT_TRUE(service::IsDeposed(st)) << st.ToString();
  {
    auto uow = database_->Begin();
    ASSERT_TRUE(uow.ok());
    auto j = (*uow)->jobs().Get(job, std::nullopt, false);
    ASSERT_TRUE(j.ok() && j->has_value());
    EXPECT_EQ((*j)->state, JobState::kPending);
    auto allocs = (*uow)->allocations().All();
    ASSERT_TRUE(allocs.ok());
    EXPECT_TRUE(allocs->empty());
  }
  // Its next check finds the lock gone and taken.
  EXPECT_FALSE(first.TryAcquire().has_value());

  service::SchedulerLoop second_loop(*database_, {}, clock, nullptr, nullptr);
  ASSERT_TRUE(second_loop.RunOnce(nullptr, second_epoch).ok());
  auto uow = database_->Begin();
  ASSERT_TRUE(uow.ok());
  auto j = (*uow)->jobs().Get(job, std::nullopt, false);
  ASSERT_TRUE(j.ok() && j->has_value());
  EXPECT_EQ((*j)->state, JobState::kScheduled);
}

// A unit of the old leadership that already holds its epoch finishes before the new leadership
// begins: the two never write at the same time.
TEST_F(LeaderFenceTest, NewLeadershipWaitsForTheOldOnesOpenUnit) {
  db::LeaderLock first(*pool_, "first"), second(*pool_, "second");
  const std::optional<int64_t> first_epoch = first.TryAcquire();
  ASSERT_TRUE(first_epoch.has_value());
  auto held = database_->Begin();
  ASSERT_TRUE(held.ok());
  ASSERT_TRUE((*held)->leader().Hold(*first_epoch).ok());

  KillLeaderSession();
  std::atomic<bool> done{false};
  std::optional<int64_t> second_epoch;
  std::thread taker([&] {
    second_epoch = AcquireWithin(second, 10);
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_FALSE(done.load()) << "the new leadership began while the old one's unit was open";
  ASSERT_TRUE((*held)->Commit().ok());
  taker.join();
  ASSERT_TRUE(second_epoch.has_value());
  EXPECT_GT(*second_epoch, *first_epoch);

  auto late = database_->Begin();
  ASSERT_TRUE(late.ok());
  common::Status st = (*late)->leader().Hold(*first_epoch);
  EXPECT_TRUE(service::IsDeposed(st)) << st.ToString();
}

}  // namespace
}  // namespace controlplane
