// What one heartbeat costs PostgreSQL as the jobs on its node grow (label pg): the statements a
// steady heartbeat runs (every job running and acknowledged) are counted on the pool, with a few
// jobs on the node and with many, and must not grow with them. The behaviour of heartbeats is
// proved by the service flows (testing/service_flow_suite.h), which run on PostgreSQL too.
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
  void SetUp() override { OpenFreshDatabase("heartbeat_cost"); }

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
  Principal a = MakeTenant("a");
  auto clock = [this] { return now_.load(); };
  service::LogFiles files(data_dir_);
  service::NodeService nodes(*database_, files, 1000, clock, nullptr);
  service::SchedulerLoop loop(*database_, {1000, 500, 1000, {}}, clock, nullptr, nullptr);
  service::JobsService jobs(*database_, api::SpecLimits{}, clock, nullptr);
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

}  // namespace
}  // namespace controlplane
