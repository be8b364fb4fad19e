// The scheduler loop against a real PostgreSQL (label pg): preemption carried out end to end
// (the victim is killed through its agent's heartbeat and requeued with its place and its
// checkpoint), and reasons written back. The decision itself is tested without a database
// (service/scheduler_test.cc and friends).
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>

#include "controlplane/db/migrations.h"
#include "controlplane/db/stores.h"
#include "controlplane/service/auth.h"
#include "controlplane/service/fair_share_store.h"
#include "controlplane/service/jobs_service.h"
#include "controlplane/service/node_service.h"
#include "controlplane/service/scheduler_loop.h"
#include "controlplane/testing/pg_database_fixture.h"

namespace controlplane {
namespace {

using api::JobState;
using service::Principal;

class SchedulerPgTest : public testing::PgDatabaseTest {
 protected:
  void SetUp() override {
    OpenFreshDatabase("sched");
    if (HasFatalFailure()) return;
    auto uow = database_->Begin();
    ASSERT_TRUE(uow.ok());
    service::TenantRecord t;
    t.name = "a";
    auto id = (*uow)->tenants().CreateTenant(t, now_.load());
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    ASSERT_TRUE((*uow)->Commit().ok());
    tenant_.tenant_id = *id;
    tenant_.tenant = "a";
    tenant_.role = "member";
    tenant_.token_name = "member";
    join_ = tenant_;
    join_.role = "agent";
  }

  // Registers node-a with 2 cpu slots and returns its credential as the server resolves it.
  Principal RegisterNode(service::NodeService& nodes, int64_t* node_id) {
    api::RegisterRequest reg{"node-a", "127.0.0.1", "http://127.0.0.1:1", 2, 0, {}};
    auto node = nodes.Register(join_, reg);
    EXPECT_TRUE(node.ok()) << node.status().ToString();
    if (!node.ok()) return {};
    *node_id = node->node_id;
    auto p = service::Authenticate(*database_, "Bearer " + node->node_token, now_.load());
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return p.ok() ? *p : Principal{};
  }

  // The node service and a scheduler loop that lets priority 80 and above preempt, both on the
  // test clock: what each preemption test runs.
  struct PreemptingCluster {
    explicit PreemptingCluster(SchedulerPgTest& t)
        : files(t.data_dir_),
          nodes(*t.database_, files, 1000, t.Clock(), nullptr),
          loop(*t.database_, PreemptAt(80), t.Clock(), nullptr, nullptr) {}
    static service::SchedulerLoop::Options PreemptAt(int priority) {
      service::SchedulerLoop::Options o;
      o.schedule.preempt_min_priority = priority;
      return o;
    }
    service::LogFiles files;
    service::NodeService nodes;
    service::SchedulerLoop loop;
  };

  std::function<int64_t()> Clock() {
    return [this] { return now_.load(); };
  }

  service::JobsService Jobs() {
    return service::JobsService(
        *database_, api::SpecLimits{}, [this] { return now_.load(); }, nullptr);
  }

  Principal AddTenant(const std::string& name) {
    auto uow = database_->Begin();
    EXPECT_TRUE(uow.ok());
    service::TenantRecord t;
    t.name = name;
    auto id = (*uow)->tenants().CreateTenant(t, now_.load());
    EXPECT_TRUE(id.ok() && (*uow)->Commit().ok());
    Principal p = tenant_;
    p.tenant_id = id.ok() ? *id : 0;
    p.tenant = name;
    return p;
  }

  static std::string Spec(const std::string& name, int slots, int priority) {
    return R"({"name":")" + name + R"(","kind":"command","command":["true"],"priority":)" +
           std::to_string(priority) + R"(,"resources":{"ranks_per_node":)" + std::to_string(slots) +
           "}}";
  }

  Principal tenant_, join_;
};

TEST_F(SchedulerPgTest, PreemptedJobIsKilledThenRequeuedWithItsPlaceAndCheckpoint) {
  auto jobs = Jobs();
  PreemptingCluster cluster(*this);
  service::NodeService& nodes = cluster.nodes;
  service::SchedulerLoop& loop = cluster.loop;

  int64_t node_id = 0;
  const Principal agent = RegisterNode(nodes, &node_id);

  // A low-priority job takes the node and writes a checkpoint.
  auto low = jobs.Submit(tenant_, Spec("low", 2, 10), "");
  ASSERT_TRUE(low.ok()) << low.status().ToString();
  const int64_t low_id = low->job.job.id;
  const int64_t low_submitted = low->job.job.created_ms;
  ASSERT_TRUE(loop.RunOnce().ok());
  auto launch = nodes.Heartbeat(agent, node_id, {});
  ASSERT_TRUE(launch.ok() && launch->commands.size() == 1u);
  api::HeartbeatRequest running;
  running.running = {low_id};
  running.events = {
      {low_id, 0, "checkpoint", {{"step", 40}, {"path", "/ck/step-40"}, {"bytes", 1}}}};
  ASSERT_TRUE(nodes.Heartbeat(agent, node_id, running).ok());
  ASSERT_EQ(jobs.Get(tenant_, low_id)->job.state, JobState::kRunning);

  // A job at priority 90 arrives: the low one is preempted, keeping its slots until it is gone.
  now_ += 1000;
  auto high = jobs.Submit(tenant_, Spec("high", 2, 90), "");
  ASSERT_TRUE(high.ok());
  const int64_t high_id = high->job.job.id;
  ASSERT_TRUE(loop.RunOnce().ok());
  auto victim = jobs.Get(tenant_, low_id);
  EXPECT_EQ(victim->job.state, JobState::kRestarting);
  EXPECT_EQ(victim->job.reason,
            "preempted by job " + std::to_string(high_id) + ": priority 10 below 90, same tenant");
  auto waiting = jobs.Get(tenant_, high_id);
  EXPECT_EQ(waiting->job.state, JobState::kPending);
  EXPECT_EQ(waiting->job.reason, "preempting jobs " + std::to_string(low_id));
  // Nothing is placed over it while it is leaving, and it is not preempted twice.
  ASSERT_TRUE(loop.RunOnce().ok());
  EXPECT_EQ(jobs.Get(tenant_, high_id)->job.state, JobState::kPending);
  EXPECT_EQ(jobs.Get(tenant_, high_id)->job.reason, "preempting jobs " + std::to_string(low_id));

  // Its agent is told to kill it, and reports it gone: back to PENDING, same place and attempt.
  auto kill = nodes.Heartbeat(agent, node_id, running);
  ASSERT_TRUE(kill.ok());
  ASSERT_EQ(kill->commands.size(), 1u);
  EXPECT_EQ(kill->commands[0].type, api::Command::Type::kKill);
  EXPECT_EQ(kill->commands[0].job_id, low_id);
  api::HeartbeatRequest gone;
  gone.finished = {{low_id, 143, "killed"}};
  ASSERT_TRUE(nodes.Heartbeat(agent, node_id, gone).ok());
  auto requeued = jobs.Get(tenant_, low_id);
  EXPECT_EQ(requeued->job.state, JobState::kPending);
  EXPECT_EQ(requeued->job.reason, "preempted by job " + std::to_string(high_id) +
                                      ": priority 10 below 90, same tenant, requeued");
  EXPECT_EQ(requeued->job.attempt, 0);
  EXPECT_EQ(requeued->job.created_ms, low_submitted);
  EXPECT_FALSE(requeued->job.exit_code.has_value());

  // The high job starts; when it ends, the preempted one resumes from its checkpoint.
  ASSERT_TRUE(loop.RunOnce().ok());
  EXPECT_EQ(jobs.Get(tenant_, high_id)->job.state, JobState::kScheduled);
  EXPECT_EQ(jobs.Get(tenant_, low_id)->job.state, JobState::kPending);
  ASSERT_EQ(nodes.Heartbeat(agent, node_id, {})->commands.size(), 1u);
  api::HeartbeatRequest high_done;
  high_done.finished = {{high_id, 0, ""}};
  ASSERT_TRUE(nodes.Heartbeat(agent, node_id, high_done).ok());
  ASSERT_TRUE(loop.RunOnce().ok());
  auto relaunch = nodes.Heartbeat(agent, node_id, {});
  ASSERT_TRUE(relaunch.ok());
  ASSERT_EQ(relaunch->commands.size(), 1u);
  EXPECT_EQ(relaunch->commands[0].job_id, low_id);
  EXPECT_EQ(relaunch->commands[0].resume_from, "/ck/step-40");
}

TEST_F(SchedulerPgTest, APreemptedJobThatEndedOnItsOwnBeforeItsKillSucceeds) {
  auto jobs = Jobs();
  PreemptingCluster cluster(*this);
  service::NodeService& nodes = cluster.nodes;
  service::SchedulerLoop& loop = cluster.loop;
  int64_t node_id = 0;
  const Principal agent = RegisterNode(nodes, &node_id);
  auto low = jobs.Submit(tenant_, Spec("low", 2, 10), "");
  ASSERT_TRUE(low.ok());
  const int64_t low_id = low->job.job.id;
  ASSERT_TRUE(loop.RunOnce().ok());
  ASSERT_EQ(nodes.Heartbeat(agent, node_id, {})->commands.size(), 1u);
  api::HeartbeatRequest running;
  running.running = {low_id};
  ASSERT_TRUE(nodes.Heartbeat(agent, node_id, running).ok());
  now_ += 1000;
  auto high = jobs.Submit(tenant_, Spec("high", 2, 90), "");
  ASSERT_TRUE(high.ok());
  ASSERT_TRUE(loop.RunOnce().ok());
  ASSERT_EQ(jobs.Get(tenant_, low_id)->job.state, JobState::kRestarting);
  // Its last step ends before the kill reaches it: the agent reports it exited 0, unsignalled.
  api::HeartbeatRequest done;
  done.finished = {{low_id, 0, "", /*killed=*/false}};
  ASSERT_TRUE(nodes.Heartbeat(agent, node_id, done).ok());
  auto finished = jobs.Get(tenant_, low_id);
  EXPECT_EQ(finished->job.state, JobState::kSucceeded);
  EXPECT_EQ(finished->job.exit_code, 0);
  // Its slots are free: the preempting job is placed.
  ASSERT_TRUE(loop.RunOnce().ok());
  EXPECT_EQ(jobs.Get(tenant_, high->job.job.id)->job.state, JobState::kScheduled);
}

TEST_F(SchedulerPgTest, PreemptingAJobThatNeverLaunchedRequeuesItAtOnce) {
  auto jobs = Jobs();
  PreemptingCluster cluster(*this);
  service::NodeService& nodes = cluster.nodes;
  service::SchedulerLoop& loop = cluster.loop;
  int64_t node_id = 0;
  const Principal agent = RegisterNode(nodes, &node_id);
  auto low = jobs.Submit(tenant_, Spec("low", 2, 10), "");
  ASSERT_TRUE(loop.RunOnce().ok());  // scheduled, not yet launched
  auto high = jobs.Submit(tenant_, Spec("high", 2, 90), "");
  ASSERT_TRUE(loop.RunOnce().ok());
  EXPECT_EQ(jobs.Get(tenant_, low->job.job.id)->job.state, JobState::kPending);
  ASSERT_TRUE(loop.RunOnce().ok());  // its slots are free at once: the next cycle places high
  EXPECT_EQ(jobs.Get(tenant_, high->job.job.id)->job.state, JobState::kScheduled);
  auto launch = nodes.Heartbeat(agent, node_id, {});
  ASSERT_EQ(launch->commands.size(), 1u);
  EXPECT_EQ(launch->commands[0].job_id, high->job.job.id);
}

TEST_F(SchedulerPgTest, APreemptedJobCancelledWhileStoppingEndsCancelled) {
  auto jobs = Jobs();
  PreemptingCluster cluster(*this);
  service::NodeService& nodes = cluster.nodes;
  service::SchedulerLoop& loop = cluster.loop;
  int64_t node_id = 0;
  const Principal agent = RegisterNode(nodes, &node_id);
  auto low = jobs.Submit(tenant_, Spec("low", 2, 10), "");
  ASSERT_TRUE(loop.RunOnce().ok());
  ASSERT_EQ(nodes.Heartbeat(agent, node_id, {})->commands.size(), 1u);  // launched
  auto high = jobs.Submit(tenant_, Spec("high", 2, 90), "");
  ASSERT_TRUE(loop.RunOnce().ok());
  ASSERT_EQ(jobs.Get(tenant_, low->job.job.id)->job.state, JobState::kRestarting);
  auto cancelled = jobs.Cancel(tenant_, low->job.job.id);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status().ToString();
  EXPECT_EQ(cancelled->job.state, JobState::kCancelling);
  auto kill = nodes.Heartbeat(agent, node_id, {});
  ASSERT_EQ(kill->commands.size(), 1u);
  EXPECT_EQ(kill->commands[0].type, api::Command::Type::kKill);
  api::HeartbeatRequest gone;
  gone.finished = {{low->job.job.id, 143, "killed"}};
  ASSERT_TRUE(nodes.Heartbeat(agent, node_id, gone).ok());
  EXPECT_EQ(jobs.Get(tenant_, low->job.job.id)->job.state, JobState::kCancelled);
  ASSERT_TRUE(loop.RunOnce().ok());
  EXPECT_EQ(jobs.Get(tenant_, high->job.job.id)->job.state, JobState::kScheduled);
}

// A cycle reads the queue without locking it, so a cancel is never held up by a cycle deciding
// over a long queue: here the job is cancelled (and committed) while the cycle decides, between
// its read and its writes. The cycle locks the jobs it places and reads them again, so the
// cancelled job is not placed, and its slots go to the next job in the next cycle.
TEST_F(SchedulerPgTest, AJobCancelledWhileTheCycleDecidesIsNotPlaced) {
  auto jobs = Jobs();
  service::LogFiles files(data_dir_);
  service::NodeService nodes(*database_, files, 1000, Clock(), nullptr);
  int64_t node_id = 0;
  RegisterNode(nodes, &node_id);
  auto first = jobs.Submit(tenant_, Spec("first", 2, 10), "");
  ASSERT_TRUE(first.ok());
  const int64_t id = first->job.job.id;
  std::atomic<int> cancels{0};
  service::SchedulerLoopHooks hooks;
  hooks.forecast = [&](const service::ClusterSnapshot&, const std::vector<service::JobRecord>&,
                       std::vector<int64_t>) {
    if (cancels++ > 0) return;
    // Another connection, committed before the cycle writes; it waited on no lock.
    auto c = Jobs().Cancel(tenant_, id);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
  };
  service::SchedulerLoop loop(*database_, {}, Clock(), nullptr, nullptr, hooks);
  service::CycleStats stats;
  ASSERT_TRUE(loop.RunOnce(&stats).ok());
  EXPECT_EQ(cancels.load(), 1);
  EXPECT_EQ(stats.scheduled, 0);
  EXPECT_EQ(jobs.Get(tenant_, id)->job.state, JobState::kCancelled);
  {
    auto uow = database_->Begin();
    ASSERT_TRUE(uow.ok());
    EXPECT_TRUE((*uow)->allocations().ForJob(id)->empty());
  }
  auto second = jobs.Submit(tenant_, Spec("second", 2, 10), "");
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(loop.RunOnce(&stats).ok());
  EXPECT_EQ(stats.scheduled, 1);
  EXPECT_EQ(jobs.Get(tenant_, second->job.job.id)->job.state, JobState::kScheduled);
  EXPECT_EQ(jobs.Get(tenant_, id)->job.state, JobState::kCancelled);
}

TEST_F(SchedulerPgTest, QuotasComeFromTheTenantRecord) {
  {
    auto uow = database_->Begin();
    ASSERT_TRUE(uow.ok());
    auto t = (*uow)->tenants().GetTenant(tenant_.tenant_id, true);
    ASSERT_TRUE(t.ok() && t->has_value());
    (*t)->quota.running_jobs = 1;
    ASSERT_TRUE((*uow)->tenants().UpdateTenant(**t, now_.load()).ok());
    ASSERT_TRUE((*uow)->Commit().ok());
  }
  auto jobs = Jobs();
  service::LogFiles files(data_dir_);
  auto clock = [this] { return now_.load(); };
  service::NodeService nodes(*database_, files, 1000, clock, nullptr);
  service::SchedulerLoop loop(*database_, {}, clock, nullptr, nullptr);
  int64_t node_id = 0;
  RegisterNode(nodes, &node_id);
  auto first = jobs.Submit(tenant_, Spec("first", 1, 50), "");
  auto second = jobs.Submit(tenant_, Spec("second", 1, 50), "");
  ASSERT_TRUE(first.ok() && second.ok());
  ASSERT_TRUE(loop.RunOnce().ok());
  EXPECT_EQ(jobs.Get(tenant_, first->job.job.id)->job.state, JobState::kScheduled);
  auto waiting = jobs.Get(tenant_, second->job.job.id);
  EXPECT_EQ(waiting->job.state, JobState::kPending);
  EXPECT_EQ(waiting->job.reason, "tenant quota: running jobs 1/1");
}

TEST_F(SchedulerPgTest, UsageAccruesIntoTheFairShareHistoryAndDailyTotals) {
  auto jobs = Jobs();
  service::LogFiles files(data_dir_);
  auto clock = [this] { return now_.load(); };
  service::NodeService nodes(*database_, files, 1000, clock, nullptr);
  service::SchedulerLoop::Options opts;
  opts.accrue_period_ms = 5000;
  service::SchedulerLoop loop(*database_, opts, clock, nullptr, nullptr);
  int64_t node_id = 0;
  const Principal agent = RegisterNode(nodes, &node_id);
  auto job = jobs.Submit(tenant_, Spec("holder", 2, 50), "");
  ASSERT_TRUE(job.ok());
  ASSERT_TRUE(loop.RunOnce().ok());  // starts the clock and places the job
  EXPECT_EQ(jobs.Get(tenant_, job->job.job.id)->job.state, JobState::kScheduled);
  now_ += 10'000;
  ASSERT_TRUE(nodes.Heartbeat(agent, node_id, {}).ok());  // the node stays UP
  ASSERT_TRUE(loop.RunOnce().ok());                       // 2 slots held for 10 s
  now_ += 1'000;
  ASSERT_TRUE(loop.RunOnce().ok());  // too soon: nothing more

  auto uow = database_->Begin();
  ASSERT_TRUE(uow.ok());
  auto state = (*uow)->fair_share().Load();
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  EXPECT_EQ(state->accrued_ms, now_.load() - 1'000);
  EXPECT_NEAR(state->usage[tenant_.tenant_id][service::kCpuSlots], 20.0, 0.01);
  const std::string day = service::UtcDay(now_.load());
  auto daily = (*uow)->fair_share().ListDailyUsage(tenant_.tenant_id, day, day);
  ASSERT_TRUE(daily.ok()) << daily.status().ToString();
  ASSERT_EQ(daily->size(), 1u);
  EXPECT_EQ((*daily)[0], (service::DailyUsage{tenant_.tenant_id, 0, day, "cpu", 20.0}));
  EXPECT_TRUE((*uow)->fair_share().ListDailyUsage(tenant_.tenant_id + 1, day, day)->empty());
}

TEST_F(SchedulerPgTest, TheTenantWithLessHistoryGoesFirst) {
  const Principal b = AddTenant("b");
  {
    auto uow = database_->Begin();
    ASSERT_TRUE(uow.ok());
    service::FairShareState s;
    s.accrued_ms = now_.load();
    s.usage[tenant_.tenant_id] = {1e7, 0};
    ASSERT_TRUE((*uow)->fair_share().Save(s).ok());
    ASSERT_TRUE((*uow)->Commit().ok());
  }
  auto jobs = Jobs();
  service::LogFiles files(data_dir_);
  auto clock = [this] { return now_.load(); };
  service::NodeService nodes(*database_, files, 1000, clock, nullptr);
  service::SchedulerLoop loop(*database_, {}, clock, nullptr, nullptr);
  int64_t node_id = 0;
  RegisterNode(nodes, &node_id);
  auto older = jobs.Submit(tenant_, Spec("a-older", 2, 50), "");
  now_ += 1000;
  auto newer = jobs.Submit(b, Spec("b-newer", 2, 50), "");
  ASSERT_TRUE(older.ok() && newer.ok()) << newer.status().ToString();
  ASSERT_TRUE(loop.RunOnce().ok());
  EXPECT_EQ(jobs.Get(b, newer->job.job.id)->job.state, JobState::kScheduled);
  EXPECT_EQ(jobs.Get(tenant_, older->job.job.id)->job.state, JobState::kPending);
}

}  // namespace
}  // namespace controlplane
