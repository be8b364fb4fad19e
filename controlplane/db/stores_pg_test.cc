// Stores and services against a real PostgreSQL (label pg): migrations, the job store with
// pagination and tenant isolation, state transitions and their events, the scheduler loop and
// heartbeat processing. Each test gets a fresh database in one cluster per binary.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>

#include "controlplane/db/migrations.h"
#include "controlplane/db/stores.h"
#include "controlplane/service/auth.h"
#include "controlplane/service/jobs_service.h"
#include "controlplane/service/node_service.h"
#include "controlplane/service/scheduler_loop.h"
#include "controlplane/service/transitions.h"
#include "controlplane/testing/pg_database_fixture.h"

namespace controlplane {
namespace {

using service::Principal;

class StoresPgTest : public testing::PgDatabaseTest {
 protected:
  void SetUp() override {
    OpenFreshDatabase("stores");
    if (HasFatalFailure()) return;
    // A draining node large enough for every job here: submissions are admitted (the cluster
    // could run them) and none is placed on it.
    auto uow = database_->Begin();
    ASSERT_TRUE(uow.ok());
    api::RegisterRequest parked{"parked", "127.0.0.9", "", 64, 0, {}};
    auto id = (*uow)->nodes().Upsert(parked, now_.load());
    ASSERT_TRUE(id.ok());
    ASSERT_TRUE((*uow)->nodes().SetDraining(*id, true).ok());
    ASSERT_TRUE((*uow)->Commit().ok());
  }

  static Principal Person(int64_t tenant_id, const std::string& tenant, const std::string& role) {
    Principal p;
    p.tenant_id = tenant_id;
    p.tenant = tenant;
    p.role = role;
    p.token_name = role;
    return p;
  }

  Principal MakeTenant(const std::string& name, const std::string& role = "member") {
    auto uow = database_->Begin();
    EXPECT_TRUE(uow.ok());
    service::TenantRecord t;
    t.name = name;
    auto id = (*uow)->tenants().CreateTenant(t, now_.load());
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    EXPECT_TRUE((*uow)->Commit().ok());
    return Person(*id, name, role);
  }

  // A principal as the server would resolve it from `token`.
  Principal Resolve(const std::string& token) {
    auto p = service::Authenticate(*database_, "Bearer " + token, now_.load());
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return p.ok() ? *p : Principal{};
  }

  service::JobsService Jobs() {
    return service::JobsService(*database_, api::SpecLimits{}, [this] { return now_.load(); },
                                nullptr);
  }

  // The kept pending count of a tenant (tenant_pending_jobs) against a count of its jobs.
  void ExpectPendingCountKept(int64_t tenant_id) {
    auto uow = database_->Begin();
    ASSERT_TRUE(uow.ok());
    auto kept = (*uow)->jobs().PendingCount(tenant_id);
    auto counted = (*uow)->jobs().CountForTenant(tenant_id, {api::JobState::kPending});
    ASSERT_TRUE(kept.ok() && counted.ok());
    EXPECT_EQ(*kept, *counted) << "tenant " << tenant_id;
  }

  static std::string Spec(const std::string& name, int nodes = 1, int max_restarts = 0) {
    return R"({"name":")" + name + R"(","kind":"command","command":["true"],"max_restarts":)" +
           std::to_string(max_restarts) + R"(,"resources":{"nodes":)" + std::to_string(nodes) +
           "}}";
  }

};

TEST_F(StoresPgTest, MigrationsApplyOnceAndReapplyAsNoOp) {
  EXPECT_EQ(*db::CurrentSchemaVersion(*pool_), db::EmbeddedMigrations().back().version);
  auto again = db::ApplyMigrations(*pool_, db::EmbeddedMigrations());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, 0);
  auto fresh = pg_->CreateDatabase("fresh_schema");
  ASSERT_TRUE(fresh.ok());
  auto pool = db::PgPool::Open(*fresh, 1);
  ASSERT_TRUE(pool.ok());
  EXPECT_EQ(*db::CurrentSchemaVersion(**pool), 0);
  EXPECT_EQ(*db::ApplyMigrations(**pool, db::EmbeddedMigrations()),
            static_cast<int>(db::EmbeddedMigrations().size()));
  EXPECT_EQ(*db::ApplyMigrations(**pool, db::EmbeddedMigrations()), 0);
}

TEST_F(StoresPgTest, ListPaginatesNewestFirstWithinTenant) {
  Principal a = MakeTenant("a"), b = MakeTenant("b");
  auto jobs = Jobs();
  std::vector<int64_t> a_ids;
  for (int i = 0; i < 5; ++i) {
    auto r = jobs.Submit(a, Spec("a" + std::to_string(i)), "");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    a_ids.push_back(r->job.job.id);
    auto rb = jobs.Submit(b, Spec("b" + std::to_string(i)), "");
    ASSERT_TRUE(rb.ok());
  }
  std::vector<int64_t> seen;
  std::string cursor;
  int pages = 0;
  do {
    auto page = jobs.List(a, 2, cursor, "");
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    for (const auto& v : page->jobs) {
      EXPECT_EQ(v.job.tenant, "a");
      seen.push_back(v.job.id);
    }
    cursor = page->next_cursor.value_or("");
    ++pages;
  } while (!cursor.empty() && pages < 10);
  EXPECT_EQ(pages, 3);
  std::vector<int64_t> want(a_ids.rbegin(), a_ids.rend());
  EXPECT_EQ(seen, want);

  // Another tenant's job does not exist for you; a cluster-admin sees every tenant.
  auto other = jobs.Get(b, a_ids[0]);
  EXPECT_EQ(other.status().code(), common::Code::kNotFound);
  EXPECT_EQ(jobs.Cancel(b, a_ids[0]).status().code(), common::Code::kNotFound);
  Principal admin = Person(a.tenant_id, "a", "cluster-admin");
  auto all = jobs.List(admin, 100, "", "");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->jobs.size(), 10u);
  auto pending = jobs.List(b, 100, "", "PENDING");
  ASSERT_TRUE(pending.ok());
  EXPECT_EQ(pending->jobs.size(), 5u);
  EXPECT_EQ(jobs.List(a, 0, "", "").status().code(), common::Code::kInvalidArgument);
  EXPECT_EQ(jobs.List(a, 10, "x", "").status().code(), common::Code::kInvalidArgument);
}

TEST_F(StoresPgTest, IdempotencyKeyReturnsTheSameJob) {
  Principal a = MakeTenant("a"), b = MakeTenant("b");
  auto jobs = Jobs();
  auto first = jobs.Submit(a, Spec("x"), "key-1");
  auto again = jobs.Submit(a, Spec("x"), "key-1");
  auto other_tenant = jobs.Submit(b, Spec("x"), "key-1");
  ASSERT_TRUE(first.ok() && again.ok() && other_tenant.ok());
  EXPECT_TRUE(first->created);
  EXPECT_FALSE(again->created);
  EXPECT_EQ(first->job.job.id, again->job.job.id);
  EXPECT_NE(first->job.job.id, other_tenant->job.job.id);
}

TEST_F(StoresPgTest, TransitionsWriteStateEventsAndRejectIllegalMoves) {
  Principal a = MakeTenant("a");
  auto jobs = Jobs();
  auto sub = jobs.Submit(a, Spec("t"), "");
  ASSERT_TRUE(sub.ok());
  const int64_t id = sub->job.job.id;
  auto cancelled = jobs.Cancel(a, id);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status().ToString();
  EXPECT_EQ(cancelled->job.state, api::JobState::kCancelled);
  EXPECT_TRUE(cancelled->job.finished_ms.has_value());
  EXPECT_EQ(jobs.Cancel(a, id).status().code(), common::Code::kFailedPrecondition);

  auto events = jobs.Events(a, id, 0, "state", 100);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[0].data["to"], "PENDING");
  EXPECT_EQ((*events)[1].data["from"], "PENDING");
  EXPECT_EQ((*events)[1].data["to"], "CANCELLED");
  EXPECT_EQ((*events)[1].data["actor"], "a/member");

  // An illegal transition changes nothing and writes no event.
  auto uow = database_->Begin();
  ASSERT_TRUE(uow.ok());
  auto job = (*uow)->jobs().Get(id, std::nullopt, true);
  ASSERT_TRUE(job.ok() && job->has_value());
  auto st = service::Transition(**uow, **job, api::JobState::kRunning, "", "test", now_);
  EXPECT_EQ(st.code(), common::Code::kFailedPrecondition);
  ASSERT_TRUE((*uow)->Commit().ok());
  EXPECT_EQ(jobs.Events(a, id, 0, "", 100)->size(), 2u);
  EXPECT_EQ(jobs.Events(a, id, (*events)[0].id, "", 100)->size(), 1u);
}

TEST_F(StoresPgTest, ScheduleLaunchFinishAndNodeLoss) {
  Principal a = MakeTenant("a");
  Principal join = Person(a.tenant_id, "a", "agent");
  auto jobs = Jobs();
  service::LogFiles files(data_dir_);
  auto clock = [this] { return now_.load(); };
  service::NodeService nodes(*database_, files, 1000, clock, nullptr);
  service::SchedulerLoop loop(*database_, {1000, 500}, clock, nullptr, nullptr);

  api::RegisterRequest reg{"node-a", "127.0.0.1", "http://127.0.0.1:1", 2, 0, {}};
  auto node = nodes.Register(join, reg);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  ASSERT_FALSE(node->node_token.empty());
  Principal agent = Resolve(node->node_token);
  EXPECT_EQ(agent.role, "node");
  EXPECT_EQ(agent.node_id, node->node_id);
  EXPECT_EQ(nodes.Register(a, reg).status().code(), common::Code::kPermissionDenied);
  // The join token cannot take the name of a live node; its own credential re-registers it.
  EXPECT_EQ(nodes.Register(join, reg).status().code(), common::Code::kAlreadyExists);
  auto again = nodes.Register(agent, reg);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->node_id, node->node_id);
  EXPECT_TRUE(again->node_token.empty());
  // The join token is no node credential, and a credential acts for its own node only.
  EXPECT_EQ(nodes.Heartbeat(join, node->node_id, {}).status().code(),
            common::Code::kPermissionDenied);
  EXPECT_EQ(nodes.Heartbeat(agent, node->node_id + 1000, {}).status().code(),
            common::Code::kPermissionDenied);
  auto ok_job = jobs.Submit(a, Spec("ok"), "");
  auto too_big = jobs.Submit(a, Spec("big", 2), "");
  auto restartable = jobs.Submit(a, Spec("again", 1, 1), "");
  ASSERT_TRUE(ok_job.ok() && too_big.ok() && restartable.ok());
  ASSERT_TRUE(loop.RunOnce().ok());
  EXPECT_EQ(jobs.Get(a, ok_job->job.job.id)->job.state, api::JobState::kScheduled);
  EXPECT_EQ(jobs.Get(a, restartable->job.job.id)->job.state, api::JobState::kScheduled);
  auto big = jobs.Get(a, too_big->job.job.id);
  EXPECT_EQ(big->job.state, api::JobState::kPending);
  EXPECT_EQ(big->job.reason,
            "waiting for 2 nodes with 1 free cpu slots each (1 fit); no reservation: too few nodes "
            "are expected to free up (jobs without a time limit, or reserved for jobs ahead)");

  // The head agent gets each launch exactly once.
  auto hb = nodes.Heartbeat(agent, node->node_id, {});
  ASSERT_TRUE(hb.ok()) << hb.status().ToString();
  ASSERT_EQ(hb->commands.size(), 2u);
  EXPECT_EQ(hb->commands[0].type, api::Command::Type::kLaunch);
  EXPECT_EQ(hb->commands[0].hosts.at(0).name, "node-a");
  EXPECT_EQ(nodes.Heartbeat(agent, node->node_id, {})->commands.size(), 0u);

  api::HeartbeatRequest report;
  report.running = {ok_job->job.job.id, restartable->job.job.id};
  report.events = {{ok_job->job.job.id, 0, "step", {{"step", 5}, {"loss", 0.5}}},
                   {ok_job->job.job.id, 0, "checkpoint", {{"step", 5}, {"path", "/c"}, {"bytes", 9}}},
                   {restartable->job.job.id, 0, "checkpoint",
                    {{"step", 7}, {"path", "/again/step-7.ckpt"}, {"bytes", 9}}}};
  report.logs = {{ok_job->job.job.id, 0, 0, "line\n"}};
  ASSERT_TRUE(nodes.Heartbeat(agent, node->node_id, report).ok());
  auto running = jobs.Get(a, ok_job->job.job.id);
  EXPECT_EQ(running->job.state, api::JobState::kRunning);
  EXPECT_EQ((*running->last_step)["step"], 5);
  EXPECT_EQ(running->latest_checkpoint->path, "/c");
  ASSERT_TRUE(nodes.Heartbeat(agent, node->node_id, report).ok());  // a retry: no duplicate bytes
  auto logs = jobs.Logs(a, ok_job->job.job.id);
  ASSERT_EQ(logs->logs.size(), 1u);
  EXPECT_EQ(logs->logs[0].bytes, 5);

  api::HeartbeatRequest done;
  done.finished = {{ok_job->job.job.id, 3, ""}};
  ASSERT_TRUE(nodes.Heartbeat(agent, node->node_id, done).ok());
  auto failed = jobs.Get(a, ok_job->job.job.id);
  EXPECT_EQ(failed->job.state, api::JobState::kFailed);
  EXPECT_EQ(failed->job.exit_code, 3);
  EXPECT_EQ(failed->job.reason, "exited with code 3");
  // The job keeps the record of where it ran; its slots are free again.
  EXPECT_EQ(failed->allocation.size(), 1u);

  // Silence for more than 3 intervals: the node is DOWN and its job restarts (attempt 1).
  now_ += 3500;
  ASSERT_TRUE(loop.RunOnce().ok());
  auto restarted = jobs.Get(a, restartable->job.job.id);
  EXPECT_EQ(restarted->job.state, api::JobState::kPending);
  EXPECT_EQ(restarted->job.attempt, 1);
  auto list = nodes.List(a);
  EXPECT_EQ((*list)["nodes"][0]["state"], "DOWN");
  auto ev = jobs.Events(a, restartable->job.job.id, 0, "state", 100);
  ASSERT_GE(ev->size(), 4u);
  EXPECT_EQ(ev->back().data["to"], "PENDING");
  EXPECT_EQ((*ev)[ev->size() - 2].data["to"], "RESTARTING");

  // When a node is back, the restarted job is placed again and its launch resumes from the
  // checkpoint the first attempt wrote; a first launch carries none.
  EXPECT_TRUE(hb->commands[0].resume_from.empty());
  // DOWN, the node may be claimed again by the join token: a new credential, the old one revoked.
  auto rejoined = nodes.Register(join, reg);
  ASSERT_TRUE(rejoined.ok()) << rejoined.status().ToString();
  EXPECT_EQ(rejoined->node_id, node->node_id);
  EXPECT_EQ(service::Authenticate(*database_, "Bearer " + node->node_token, now_.load())
                .status()
                .message(),
            "token revoked");
  agent = Resolve(rejoined->node_token);
  ASSERT_TRUE(loop.RunOnce().ok());
  auto relaunch = nodes.Heartbeat(agent, node->node_id, {});
  ASSERT_TRUE(relaunch.ok()) << relaunch.status().ToString();
  bool found = false;
  for (const auto& c : relaunch->commands) {
    if (c.type != api::Command::Type::kLaunch || c.job_id != restartable->job.job.id) continue;
    found = true;
    EXPECT_EQ(c.attempt, 1);
    EXPECT_EQ(c.resume_from, "/again/step-7.ckpt");
  }
  EXPECT_TRUE(found);
  // Through placement, node loss, requeue and placement again, the kept count stayed true.
  ExpectPendingCountKept(a.tenant_id);
}

// The pending count a submission checks its quota against is kept, not counted: by inserts,
// by every way out of PENDING and back, by nothing a rolled-back unit of work did, and as a
// unit of work sees its own changes.
TEST_F(StoresPgTest, PendingCountIsKeptThroughEveryChange) {
  Principal a = MakeTenant("a");
  Principal b = MakeTenant("b");
  auto jobs = Jobs();
  std::vector<int64_t> ids;
  for (const Principal& p : {a, a, a, b}) {
    auto r = jobs.Submit(p, Spec("p"), "");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ids.push_back(r->job.job.id);
  }
  ExpectPendingCountKept(a.tenant_id);
  ASSERT_TRUE(jobs.Cancel(a, ids[0]).ok());
  {
    // Changes of two tenants in one unit of work, rolled back: nothing kept.
    auto uow = database_->Begin();
    ASSERT_TRUE(uow.ok());
    auto job = (*uow)->jobs().Get(ids[1], std::nullopt, true);
    ASSERT_TRUE(job.ok() && job->has_value());
    ASSERT_TRUE(
        service::Transition(**uow, **job, api::JobState::kCancelled, "test", "test", now_.load())
            .ok());
    service::NewJob nj;
    nj.tenant_id = b.tenant_id;
    nj.name = "rolled-back";
    nj.kind = "command";
    nj.spec = nlohmann::json::object();
    nj.now_ms = now_.load();
    ASSERT_TRUE((*uow)->jobs().Insert(nj).ok());
    EXPECT_EQ(*(*uow)->jobs().PendingCount(a.tenant_id), 1);
    EXPECT_EQ(*(*uow)->jobs().PendingCount(b.tenant_id), 2);
  }
  ExpectPendingCountKept(a.tenant_id);
  ExpectPendingCountKept(b.tenant_id);
  auto uow = database_->Begin();
  ASSERT_TRUE(uow.ok());
  EXPECT_EQ(*(*uow)->jobs().PendingCount(a.tenant_id), 2);
  EXPECT_EQ(*(*uow)->jobs().PendingCount(b.tenant_id), 1);
  EXPECT_EQ(*(*uow)->jobs().PendingCount(b.tenant_id + 100), 0);
}

// A statement's text is prepared once per connection and survives a rolled-back transaction.
TEST_F(StoresPgTest, StatementsArePreparedOncePerConnection) {
  const std::string sql = "SELECT $1::bigint + 1 AS n";
  auto prepared = [&](db::PgTx& tx) {
    auto r = tx.Exec("SELECT count(*) AS n FROM pg_prepared_statements WHERE statement = $1",
                     {db::P(sql)});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->Int(0, "n") : -1;
  };
  for (int round = 0; round < 2; ++round) {
    auto tx = db::PgTx::Begin(*pool_);  // the idle connection used last, again
    ASSERT_TRUE(tx.ok());
    for (int64_t i = 0; i < 3; ++i) {
      auto r = (*tx)->Exec(sql, {db::P(i)});
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(r->Int(0, "n"), i + 1);
    }
    EXPECT_EQ(prepared(**tx), 1);
    // A failed statement aborts the transaction; it is rolled back, the statements stay.
    EXPECT_FALSE((*tx)->Exec("SELECT 1/0").ok());
  }
}

TEST_F(StoresPgTest, RunningJobPastItsTimeLimitIsCancelled) {
  Principal a = MakeTenant("a");
  auto jobs = Jobs();
  service::LogFiles files(data_dir_);
  auto clock = [this] { return now_.load(); };
  service::NodeService nodes(*database_, files, 1000, clock, nullptr);
  service::SchedulerLoop loop(*database_, {1000, 500}, clock, nullptr, nullptr);
  auto reg = nodes.Register(Person(a.tenant_id, "a", "agent"),
                            {"node-t", "127.0.0.1", "", 2, 0, {}});
  ASSERT_TRUE(reg.ok()) << reg.status().ToString();
  Principal node = Resolve(reg->node_token);
  std::string limited = Spec("limited");
  limited.insert(limited.size() - 1, R"(,"time_limit_seconds":5)");
  auto job = jobs.Submit(a, limited, "");
  auto unlimited = jobs.Submit(a, Spec("unlimited"), "");
  ASSERT_TRUE(job.ok() && unlimited.ok()) << job.status().ToString();
  ASSERT_TRUE(loop.RunOnce().ok());
  const int64_t id = job->job.job.id, other = unlimited->job.job.id;
  auto launches = nodes.Heartbeat(node, reg->node_id, {});
  ASSERT_TRUE(launches.ok());
  ASSERT_EQ(launches->commands.size(), 2u);
  api::HeartbeatRequest running;
  running.running = {id, other};
  ASSERT_TRUE(nodes.Heartbeat(node, reg->node_id, running).ok());
  now_ += 4000;
  ASSERT_TRUE(nodes.Heartbeat(node, reg->node_id, running).ok());
  ASSERT_TRUE(loop.RunOnce().ok());
  EXPECT_EQ(jobs.Get(a, id)->job.state, api::JobState::kRunning);  // 4 s of 5
  now_ += 1500;
  ASSERT_TRUE(nodes.Heartbeat(node, reg->node_id, running).ok());
  ASSERT_TRUE(loop.RunOnce().ok());
  auto over = jobs.Get(a, id);
  EXPECT_EQ(over->job.state, api::JobState::kCancelling);
  EXPECT_EQ(over->job.reason, "time limit 5 s reached");
  EXPECT_EQ(jobs.Get(a, other)->job.state, api::JobState::kRunning);
  // Its node is told to kill it; once it reports the exit, the job is CANCELLED.
  auto hb = nodes.Heartbeat(node, reg->node_id, running);
  ASSERT_TRUE(hb.ok());
  ASSERT_EQ(hb->commands.size(), 1u);
  EXPECT_EQ(hb->commands[0].type, api::Command::Type::kKill);
  api::HeartbeatRequest ended;
  ended.finished = {{id, 143, "killed"}};
  ASSERT_TRUE(nodes.Heartbeat(node, reg->node_id, ended).ok());
  EXPECT_EQ(jobs.Get(a, id)->job.state, api::JobState::kCancelled);
}

}  // namespace
}  // namespace controlplane
