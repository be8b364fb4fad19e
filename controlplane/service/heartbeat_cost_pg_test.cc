// What one heartbeat costs PostgreSQL as the jobs on its node grow (label pg): the statements a
// steady heartbeat runs (every job running and acknowledged) are counted on the pool, with a few
// jobs on the node and with many, and must not grow with them. The behaviour of heartbeats is
// proved by the service flows (testing/service_flow_suite.h), which run on PostgreSQL too.
#include <memory>

#include <gtest/gtest.h>

#include "controlplane/db/pg.h"
#include "controlplane/service/jobs_service.h"
#include "controlplane/service/log_files.h"
#include "controlplane/service/node_service.h"
#include "controlplane/service/roles.h"
#include "controlplane/service/scheduler_loop.h"
#include "controlplane/testing/pg_database_fixture.h"

namespace controlplane {
namespace {

using service::Principal;

class HeartbeatCostPgTest : public testing::PgDatabaseTest {
 protected:
  // Tenant "a" and the services the tests drive, over a fresh database at a 1 s interval.
  void SetUp() override {
    OpenFreshDatabase("heartbeat_cost");
    a_ = MakeTenant("a");
    auto clock = [this] { return now_.load(); };
    files_ = std::make_unique<service::LogFiles>(data_dir_);
    nodes_ = std::make_unique<service::NodeService>(*database_, *files_, 1000, clock, nullptr);
    loop_ = std::make_unique<service::SchedulerLoop>(*database_,
                                                     service::SchedulerLoop::Options{1000, 500, 1000, {}},
                                                     clock, nullptr, nullptr);
    jobs_ = std::make_unique<service::JobsService>(*database_, api::SpecLimits{}, clock, nullptr);
  }

  // Submits `n` one-slot jobs, places them, and runs the heartbeats that launch them and report
  // them running. Returns the request a steady heartbeat of every job on the node sends.
  api::HeartbeatRequest StartJobs(service::JobsService& jobs, service::SchedulerLoop& loop,
                                  service::NodeService& nodes, const Principal& a,
                                  const Principal& node, int n, api::HeartbeatRequest held) {
    for (int i = 0; i < n; ++i) {
      auto r = jobs.Submit(a, R"({"name":"j","kind":"command","command":["true"],"resources":{"nodes":1}})", "");
      EXPECT_TRUE(r.ok()) << r.status().ToString();
    }
    EXPECT_TRUE(loop.RunOnce().ok());
    auto reply = nodes.Heartbeat(node, node.node_id, held);
    EXPECT_TRUE(reply.ok()) << reply.status().ToString();
    if (!reply.ok()) return held;
    EXPECT_EQ(static_cast<int>(reply->commands.size()), n);
    for (const api::Command& c : reply->commands) {
      held.launched.push_back({c.job_id, c.attempt});
      held.running.push_back(c.job_id);
    }
    // Acknowledged and moved to RUNNING in this one.
    EXPECT_TRUE(nodes.Heartbeat(node, node.node_id, held).ok());
    return held;
  }

  Principal a_;
  std::unique_ptr<service::LogFiles> files_;
  std::unique_ptr<service::NodeService> nodes_;
  std::unique_ptr<service::SchedulerLoop> loop_;
  std::unique_ptr<service::JobsService> jobs_;

  uint64_t StatementsOf(service::NodeService& nodes, const Principal& node,
                        const api::HeartbeatRequest& req) {
    const uint64_t before = pool_->StatementsRun();
    auto reply = nodes.Heartbeat(node, node.node_id, req);
    EXPECT_TRUE(reply.ok()) << reply.status().ToString();
    EXPECT_TRUE(reply.ok() && reply->commands.empty());
    return pool_->StatementsRun() - before;
  }
};

TEST_F(HeartbeatCostPgTest, StatementsPerHeartbeatDoNotGrowWithTheJobsOnTheNode) {
  Principal& a = a_;
  service::NodeService& nodes = *nodes_;
  service::SchedulerLoop& loop = *loop_;
  service::JobsService& jobs = *jobs_;
  auto reg = nodes.Register(Person(a.tenant_id, "a", service::kJoinRole, 0),
                            {"big", "127.0.0.1", "", 256, 0, {}, {}});
  ASSERT_TRUE(reg.ok()) << reg.status().ToString();
  Principal node = Person(a.tenant_id, "a", service::kNodeRole, 0);
  node.node_id = reg->node_id;

  api::HeartbeatRequest held;
  held.has_launched = true;
  held = StartJobs(jobs, loop, nodes, a, node, 2, held);
  const uint64_t few = StatementsOf(nodes, node, held);
  held = StartJobs(jobs, loop, nodes, a, node, 120, held);
  ASSERT_EQ(held.running.size(), 122u);
  const uint64_t many = StatementsOf(nodes, node, held);
  EXPECT_EQ(few, many) << "2 jobs: " << few << " statements, 122 jobs: " << many;
  // Read the node, record the heartbeat, read its allocations, read its jobs.
  EXPECT_LE(many, 4u);
  for (int64_t id : held.running) {
    EXPECT_EQ(jobs.Get(a, id)->job.state, api::JobState::kRunning);
  }

  // Ending them all costs a fixed number of statements beyond one transition each.
  api::HeartbeatRequest done;
  done.has_launched = true;
  for (int64_t id : held.running) done.finished.push_back({id, 0, "", false});
  const uint64_t before = pool_->StatementsRun();
  ASSERT_TRUE(nodes.Heartbeat(node, node.node_id, done).ok());
  const uint64_t ended = pool_->StatementsRun() - before;
  EXPECT_LT(ended, 8 * held.running.size()) << ended;
  for (int64_t id : held.running) {
    EXPECT_EQ(jobs.Get(a, id)->job.state, api::JobState::kSucceeded);
  }
}

// A node holding part of many multi-node jobs: once its agent lists the assignments it holds,
// a steady heartbeat reads nothing more of them, however many they are.
TEST_F(HeartbeatCostPgTest, AWorkerNodesHeartbeatDoesNotGrowWithItsAssignments) {
  Principal& a = a_;
  service::NodeService& nodes = *nodes_;
  service::SchedulerLoop& loop = *loop_;
  service::JobsService& jobs = *jobs_;
  const Principal join = Person(a.tenant_id, "a", service::kJoinRole, 0);
  auto r1 = nodes.Register(join, {"n1", "127.0.0.1", "", 256, 0, {}, {}});
  auto r2 = nodes.Register(join, {"n2", "127.0.0.2", "", 256, 0, {}, {}});
  ASSERT_TRUE(r1.ok() && r2.ok());
  Principal n1 = Person(a.tenant_id, "a", service::kNodeRole, 0);
  n1.node_id = r1->node_id;
  Principal n2 = n1;
  n2.node_id = r2->node_id;

  // Returns the statements of one heartbeat of the node that is not the head of the jobs, and
  // checks its reply: a worker command per job, short when `ack`.
  auto worker_beat = [&](size_t n, bool ack, Principal* worker) {
    api::HeartbeatRequest req;
    req.has_launched = true;
    req.has_workers = true;
    auto first = nodes.Heartbeat(*worker, worker->node_id, req);
    EXPECT_TRUE(first.ok());
    if (!first.ok()) return uint64_t{0};
    if (ack) {
      for (const api::Command& c : first->commands) req.workers.push_back({c.job_id, c.attempt});
    }
    const uint64_t before = pool_->StatementsRun();
    auto reply = nodes.Heartbeat(*worker, worker->node_id, req);
    const uint64_t ran = pool_->StatementsRun() - before;
    EXPECT_TRUE(reply.ok());
    if (!reply.ok()) return ran;
    EXPECT_EQ(reply->commands.size(), n);
    for (const api::Command& c : reply->commands) {
      EXPECT_EQ(c.type, api::Command::Type::kWorker);
      EXPECT_EQ(c.held, ack);
    }
    return ran;
  };
  auto submit = [&](int n) {
    for (int i = 0; i < n; ++i) {
      auto r = jobs.Submit(a, R"({"name":"j","kind":"command","command":["true"],"resources":{"nodes":2}})", "");
      EXPECT_TRUE(r.ok()) << r.status().ToString();
    }
    EXPECT_TRUE(loop.RunOnce().ok());
  };
  submit(2);
  // Which node heads them depends on the placement; the other one gets the worker commands.
  auto probe = nodes.Heartbeat(n1, n1.node_id, {});
  ASSERT_TRUE(probe.ok());
  Principal* worker = !probe->commands.empty() &&
                              probe->commands[0].type == api::Command::Type::kWorker
                          ? &n1
                          : &n2;
  const uint64_t few = worker_beat(2, true, worker);
  const uint64_t few_full = worker_beat(2, false, worker);
  submit(60);
  const uint64_t many = worker_beat(62, true, worker);
  const uint64_t many_full = worker_beat(62, false, worker);
  EXPECT_EQ(few, many) << "2 jobs: " << few << " statements, 62 jobs: " << many;
  EXPECT_LE(many, 4u);
  // In full, each job's spec and logs are read again on every heartbeat.
  EXPECT_GT(many_full, few_full) << few_full << " vs " << many_full;
}

}  // namespace
}  // namespace controlplane
