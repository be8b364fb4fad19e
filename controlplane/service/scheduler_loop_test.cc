// Scheduling cycles end to end on the in-memory twin (label unit): SchedulerLoop::RunOnce reads
// the stores, Schedule() (scheduler_cycle.cc) decides, and the loop writes allocations, states and
// reasons back; agents see the outcome through their heartbeats. The decision's own rules are
// table-tested without stores in scheduler_test.cc; the same loop on PostgreSQL is
// db/scheduler_pg_test.cc.
#include "controlplane/service/scheduler_loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "common/time_util.h"
#include "controlplane/service/fair_share_store.h"
#include "controlplane/service/usage_accounting.h"
#include "controlplane/testing/memory_service_fixture.h"

namespace controlplane::service {
namespace {

using api::JobState;

class SchedulerLoopTest : public testing::MemoryServiceTest {
 protected:
  void SetUp() override {
    MemoryServiceTest::SetUp();
    a_ = AddTenant("a");
    member_ = AddPerson(a_, "member");
    join_ = AddPerson(a_, "agent");
    files_ = std::make_unique<LogFiles>(data_dir_);
    nodes_ = std::make_unique<NodeService>(db_, *files_, 1000, clock(), nullptr);
  }

  SchedulerLoop Loop(SchedulerLoop::Options opts = {}, SchedulerLoopHooks hooks = {}) {
    opts.heartbeat_interval_ms = 1000;
    return SchedulerLoop(db_, opts, clock(), nullptr, nullptr, std::move(hooks));
  }

  int64_t Submit(const std::string& spec) {
    auto r = Jobs().Submit(member_, spec, "");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->job.job.id : 0;
  }

  std::vector<AllocationRecord> Placement(int64_t job) {
    auto uow = Begin();
    return *uow->allocations().ForJob(job);
  }

  int64_t a_ = 0;
  Principal member_, join_;
  std::unique_ptr<LogFiles> files_;
  std::unique_ptr<NodeService> nodes_;
};

TEST_F(SchedulerLoopTest, AGangGetsAllItsNodesAtOnceAndItsHeadLaunchesIt) {
  int64_t n1 = 0, n2 = 0;
  const Principal c1 = AddNode(*nodes_, join_, "n1", 2, &n1);
  const Principal c2 = AddNode(*nodes_, join_, "n2", 2, &n2);
  const int64_t gang = Submit(Spec("gang", 2, 2));
  const int64_t single = Submit(Spec("single"));
  auto loop = Loop();
  CycleStats stats;
  ASSERT_TRUE(loop.RunOnce(&stats).ok());
  EXPECT_EQ(stats.scheduled, 1);
  EXPECT_EQ(stats.waiting, 1);
  EXPECT_EQ(JobRow(gang).state, JobState::kScheduled);
  const JobRecord waiting = JobRow(single);
  EXPECT_EQ(waiting.state, JobState::kPending);
  EXPECT_EQ(waiting.reason.rfind("waiting for 1 nodes with 1 free cpu slots each (0 fit", 0), 0u)
      << waiting.reason;
  auto placed = Placement(gang);
  ASSERT_EQ(placed.size(), 2u);
  EXPECT_TRUE(placed[0].is_head);
  EXPECT_EQ(placed[0].slots, 2);
  EXPECT_EQ(placed[0].ranks, 2);
  EXPECT_NE(placed[0].node_id, placed[1].node_id);

  // Only the head's agent is told to launch, with every host, until it acknowledges the launch;
  // the other node learns of its part (a worker command with the digest of the attempt's token).
  const bool head_is_n1 = placed[0].node_id == n1;
  const Principal& head = head_is_n1 ? c1 : c2;
  const Principal& other = head_is_n1 ? c2 : c1;
  auto worker_only = [&](const common::Result<api::HeartbeatResponse>& r) {
    return r.ok() && r->commands.size() == 1 &&
           r->commands[0].type == api::Command::Type::kWorker && r->commands[0].job_id == gang;
  };
  EXPECT_TRUE(worker_only(nodes_->Heartbeat(other, other.node_id, {})));
  EXPECT_FALSE(placed[0].job_token.empty());
  EXPECT_EQ(placed[0].job_token, placed[1].job_token);  // one per attempt
  auto launch = nodes_->Heartbeat(head, head.node_id, {});
  ASSERT_TRUE(launch.ok());
  ASSERT_EQ(launch->commands.size(), 1u);
  EXPECT_EQ(launch->commands[0].job_id, gang);
  ASSERT_EQ(launch->commands[0].hosts.size(), 2u);
  EXPECT_EQ(launch->commands[0].hosts[0].node_id, head.node_id);
  EXPECT_EQ(launch->commands[0].job_token, placed[0].job_token);
  EXPECT_EQ(nodes_->Heartbeat(head, head.node_id, {})->commands.size(), 1u);
  api::HeartbeatRequest acked;
  acked.has_launched = true;
  acked.launched = {{gang, 0}};
  EXPECT_TRUE(nodes_->Heartbeat(head, head.node_id, acked)->commands.empty());
  EXPECT_TRUE(worker_only(nodes_->Heartbeat(other, other.node_id, {})));

  // When it ends its slots come back and the waiting job is placed.
  api::HeartbeatRequest done;
  done.finished = {{gang, 0, ""}};
  ASSERT_TRUE(nodes_->Heartbeat(head, head.node_id, done).ok());
  EXPECT_EQ(JobRow(gang).state, JobState::kSucceeded);
  ASSERT_TRUE(loop.RunOnce().ok());
  EXPECT_EQ(JobRow(single).state, JobState::kScheduled);
  EXPECT_EQ(JobRow(single).reason, "");
}

TEST_F(SchedulerLoopTest, PriorityGoesFirstAndDrainingOrLostNodesTakeNothing) {
  int64_t n1 = 0, n2 = 0, n3 = 0;
  const Principal c1 = AddNode(*nodes_, join_, "n1", 2, &n1);
  const Principal c2 = AddNode(*nodes_, join_, "n2", 2, &n2);
  AddNode(*nodes_, join_, "n3", 2, &n3);
  ASSERT_TRUE(nodes_->SetDraining(AddPerson(a_, "cluster-admin"), n2, true).ok());
  auto loop = Loop();
  now_ += 3500;  // n3 stays silent: DOWN after 3 intervals
  ASSERT_TRUE(nodes_->Heartbeat(c1, n1, {}).ok());
  ASSERT_TRUE(nodes_->Heartbeat(c2, n2, {}).ok());
  const int64_t low = Submit(Spec("low", 1, 2, R"(,"priority":10)"));
  const int64_t high = Submit(Spec("high", 1, 2, R"(,"priority":90)"));
  ASSERT_TRUE(loop.RunOnce().ok());
  EXPECT_EQ(JobRow(high).state, JobState::kScheduled);
  EXPECT_EQ(Placement(high).at(0).node_id, n1);
  EXPECT_EQ(JobRow(low).state, JobState::kPending);
  auto uow = Begin();
  EXPECT_EQ((**uow->nodes().Get(n3)).state, "DOWN");
  EXPECT_EQ((**uow->nodes().Get(n2)).state, "UP");
}

// The loop keeps the pending jobs' records between cycles and reads again only rows written
// since (their version changed): a reason set from outside is seen, and put right, by the next
// cycle, as is a job that left the queue.
TEST_F(SchedulerLoopTest, PendingRecordsKeptBetweenCyclesFollowTheirRows) {
  int64_t n1 = 0;
  AddNode(*nodes_, join_, "n1", 2, &n1);
  const int64_t big = Submit(Spec("big", 1, 2));
  auto loop = Loop();
  ASSERT_TRUE(loop.RunOnce().ok());
  ASSERT_EQ(JobRow(big).state, JobState::kScheduled);
  const int64_t waits = Submit(Spec("waits", 1, 2));
  const int64_t gone = Submit(Spec("gone", 1, 2));
  ASSERT_TRUE(loop.RunOnce().ok());
  const std::string reason = JobRow(waits).reason;
  ASSERT_FALSE(reason.empty());
  ASSERT_EQ(JobRow(gone).state, JobState::kPending);
  // Nothing changed since: the next cycle writes nothing, its kept records holding the reasons
  // (and row versions) the last one wrote.
  const int64_t version = JobRow(waits).version;
  ASSERT_TRUE(loop.RunOnce().ok());
  EXPECT_EQ(JobRow(waits).version, version);
  {
    auto uow = Begin();
    JobRecord j = **uow->jobs().Get(waits, std::nullopt, true);
    j.reason = "set elsewhere";
    ASSERT_TRUE(uow->jobs().Update(j).ok());
    JobRecord g = **uow->jobs().Get(gone, std::nullopt, true);
    g.state = JobState::kCancelled;
    ASSERT_TRUE(uow->jobs().Update(g).ok());
    ASSERT_TRUE(uow->Commit().ok());
  }
  CycleStats stats;
  ASSERT_TRUE(loop.RunOnce(&stats).ok());
  EXPECT_EQ(JobRow(waits).reason, reason);
  EXPECT_EQ(stats.waiting, 1);  // `gone` is no longer among them
  // Room again: the job that waited is placed, the cancelled one is not.
  {
    auto uow = Begin();
    ASSERT_TRUE(uow->allocations().ReleaseForJob(big).ok());
    JobRecord b = **uow->jobs().Get(big, std::nullopt, true);
    b.state = JobState::kSucceeded;
    ASSERT_TRUE(uow->jobs().Update(b).ok());
    ASSERT_TRUE(uow->Commit().ok());
  }
  ASSERT_TRUE(loop.RunOnce().ok());
  EXPECT_EQ(JobRow(waits).state, JobState::kScheduled);
  EXPECT_EQ(JobRow(gone).state, JobState::kCancelled);
  EXPECT_TRUE(Placement(gone).empty());
}

TEST_F(SchedulerLoopTest, ANodeLostRestartsItsJobsWhileRestartsAreLeft) {
  int64_t n1 = 0;
  const Principal c1 = AddNode(*nodes_, join_, "n1", 2, &n1);
  const int64_t again = Submit(Spec("again", 1, 1, R"(,"max_restarts":1)"));
  const int64_t once = Submit(Spec("once"));
  auto loop = Loop();
  ASSERT_TRUE(loop.RunOnce().ok());
  ASSERT_EQ(nodes_->Heartbeat(c1, n1, {})->commands.size(), 2u);
  api::HeartbeatRequest running;
  running.running = {again, once};
  running.events = {{again, 0, "checkpoint", {{"step", 7}, {"path", "/ck/7"}, {"bytes", 1}}}};
  ASSERT_TRUE(nodes_->Heartbeat(c1, n1, running).ok());
  now_ += 3001;
  ASSERT_TRUE(loop.RunOnce().ok());
  const JobRecord restarted = JobRow(again);
  EXPECT_EQ(restarted.state, JobState::kPending);
  EXPECT_EQ(restarted.attempt, 1);
  // Its requeue says why; the cycle then says why it waits: no node is up, but the lost one
  // could take it when it returns, so it is not "never fits".
  auto states = EventsOf(again, "state");
  ASSERT_GE(states.size(), 2u);
  EXPECT_EQ(states[states.size() - 2].data["to"], "RESTARTING");
  EXPECT_EQ(states.back().data["reason"], "node n1 lost, restart 1");
  EXPECT_EQ(restarted.reason.rfind("waiting for 1 nodes", 0), 0u) << restarted.reason;
  EXPECT_FALSE(restarted.started_ms);
  EXPECT_TRUE(Placement(again).empty());
  const JobRecord failed = JobRow(once);
  EXPECT_EQ(failed.state, JobState::kFailed);
  EXPECT_EQ(failed.reason, "node n1 lost");
  // The node comes back: the restarted job is placed again and resumes from its checkpoint.
  ASSERT_TRUE(nodes_->Heartbeat(c1, n1, {}).ok());
  ASSERT_TRUE(loop.RunOnce().ok());
  auto relaunch = nodes_->Heartbeat(c1, n1, {});
  ASSERT_EQ(relaunch->commands.size(), 1u);
  EXPECT_EQ(relaunch->commands[0].job_id, again);
  EXPECT_EQ(relaunch->commands[0].attempt, 1);
  EXPECT_EQ(relaunch->commands[0].resume_from, "/ck/7");
}

TEST_F(SchedulerLoopTest, AHeartbeatHeardButNotYetCommittedKeepsItsNodeUp) {
  NodeHeard heard;
  nodes_ = std::make_unique<NodeService>(db_, *files_, 1000, clock(), nullptr,
                                         NodeServiceHooks{.heard = &heard});
  int64_t n1 = 0, n2 = 0;
  const Principal c1 = AddNode(*nodes_, join_, "n1", 2, &n1);
  AddNode(*nodes_, join_, "n2", 2, &n2);
  const int64_t job = Submit(Spec("job", 1, 2));
  auto loop = Loop({}, {.heard = &heard});
  ASSERT_TRUE(loop.RunOnce().ok());
  const int64_t placed_on = Placement(job).at(0).node_id;
  const int64_t other = placed_on == n1 ? n2 : n1;
  // A heartbeat's arrival is recorded before its transaction, whose commit the DOWN rule
  // cannot see yet (held up by locks or the connection pool under load).
  now_ += 100;
  ASSERT_TRUE(nodes_->Heartbeat(c1, n1, {}).ok());
  EXPECT_EQ(heard.Last(n1), now_.load());
  now_ += 3001;
  heard.Heard(placed_on, now_.load());  // arrived, its transaction not committed
  ASSERT_TRUE(loop.RunOnce().ok());
  auto uow = Begin();
  EXPECT_EQ((**uow->nodes().Get(placed_on)).state, "UP");
  EXPECT_EQ((**uow->nodes().Get(other)).state, "DOWN");  // silent: heard neither way
  uow.reset();
  EXPECT_EQ(JobRow(job).state, JobState::kScheduled);
}

TEST_F(SchedulerLoopTest, APreemptedJobIsKilledThenRequeuedWithItsPlace) {
  int64_t n1 = 0;
  const Principal c1 = AddNode(*nodes_, join_, "n1", 2, &n1);
  SchedulerLoop::Options opts;
  opts.schedule.preempt_min_priority = 80;
  auto loop = Loop(opts);
  const int64_t low = Submit(Spec("low", 1, 2, R"(,"priority":10)"));
  ASSERT_TRUE(loop.RunOnce().ok());
  ASSERT_EQ(nodes_->Heartbeat(c1, n1, {})->commands.size(), 1u);  // launched
  now_ += 1000;
  const int64_t high = Submit(Spec("high", 1, 2, R"(,"priority":90)"));
  ASSERT_TRUE(loop.RunOnce().ok());
  EXPECT_EQ(JobRow(low).state, JobState::kRestarting);
  EXPECT_EQ(JobRow(high).reason, "preempting jobs " + std::to_string(low));
  auto kill = nodes_->Heartbeat(c1, n1, {});
  ASSERT_EQ(kill->commands.size(), 1u);
  EXPECT_EQ(kill->commands[0].type, api::Command::Type::kKill);
  api::HeartbeatRequest gone;
  gone.finished = {{low, 143, "killed"}};
  ASSERT_TRUE(nodes_->Heartbeat(c1, n1, gone).ok());
  EXPECT_EQ(JobRow(low).state, JobState::kPending);
  EXPECT_EQ(JobRow(low).attempt, 0);
  ASSERT_TRUE(loop.RunOnce().ok());
  EXPECT_EQ(JobRow(high).state, JobState::kScheduled);
  EXPECT_EQ(JobRow(low).state, JobState::kPending);
}

TEST_F(SchedulerLoopTest, UsageAccruesAndTheTenantWithLessHistoryGoesFirst) {
  const int64_t b = AddTenant("b");
  const Principal b_member = AddPerson(b, "member");
  int64_t n1 = 0;
  const Principal c1 = AddNode(*nodes_, join_, "n1", 2, &n1);
  auto loop = Loop();
  const int64_t holder = Submit(Spec("holder", 1, 2));
  ASSERT_TRUE(loop.RunOnce().ok());  // starts the clock, places the job
  now_ += 10'000;
  ASSERT_TRUE(nodes_->Heartbeat(c1, n1, {}).ok());
  ASSERT_TRUE(loop.RunOnce().ok());  // 2 slots for 10 s
  {
    auto uow = Begin();
    auto state = *uow->fair_share().Load();
    EXPECT_NEAR(state.usage[a_][kCpuSlots], 20.0, 0.01);
    const std::string day = UtcDay(now_.load());
    auto daily = *uow->fair_share().ListDailyUsage(a_, day, day);
    ASSERT_EQ(daily.size(), 1u);
    EXPECT_EQ(daily[0].token_id, member_.token_id);
    EXPECT_NEAR(daily[0].slot_seconds, 20.0, 1e-9);
  }
  // With the node free again, a's older job waits behind b's newer one.
  api::HeartbeatRequest done;
  done.finished = {{holder, 0, ""}};
  ASSERT_TRUE(nodes_->Heartbeat(c1, n1, done).ok());
  const int64_t a_job = Submit(Spec("a-older", 1, 2));
  now_ += 1000;
  auto b_job = Jobs().Submit(b_member, Spec("b-newer", 1, 2), "");
  ASSERT_TRUE(b_job.ok());
  ASSERT_TRUE(loop.RunOnce().ok());
  EXPECT_EQ(JobRow(b_job->job.job.id).state, JobState::kScheduled);
  EXPECT_EQ(JobRow(a_job).state, JobState::kPending);
}

}  // namespace
}  // namespace controlplane::service

namespace controlplane::service {
namespace {

// A burst of wakes (a submit each) runs a few cycles, not one per wake: a woken cycle waits for
// the gap since the previous one, and one cycle then takes every wake of the gap.
TEST_F(SchedulerLoopTest, ABurstOfWakesRunsOneCyclePerGapNotOnePerWake) {
  std::atomic<int> cycles{0};
  SchedulerLoop::Options opts;
  opts.heartbeat_interval_ms = 1000;
  opts.period_ms = 600'000;  // only wakes start cycles
  opts.woken_gap_ms = 100;
  SchedulerLoop loop(db_, opts, clock(), nullptr, [&](const CycleStats&) { ++cycles; });
  loop.Start();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 50; ++i) {
    loop.Wake();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const double burst_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::this_thread::sleep_for(std::chrono::milliseconds(250));  // the last gap's cycle
  loop.Stop();
  // One cycle at the first wake, then one per 100 ms gap at most (+1 after the burst).
  EXPECT_GE(cycles.load(), 2);
  EXPECT_LE(cycles.load(), 2 + static_cast<int>(burst_s / 0.1));
}

// An idle loop's cycles (no wake) are spaced by the period, or by woken_gap_cycles times the
// last cycle's duration when that is longer: with a long queue a cycle is long, and deciding
// over it again and again for nothing new would keep a core busy.
TEST_F(SchedulerLoopTest, AnIdleLoopSpacesLongCyclesByTheirDuration) {
  int64_t n1 = 0;
  AddNode(*nodes_, join_, "n1", 1, &n1);
  Submit(Spec("holds"));  // placed in the first cycle, on the only slot
  Submit(Spec("waits"));  // pending in every cycle
  std::mutex mu;
  std::vector<double> starts;
  SchedulerLoopHooks hooks;
  // Runs in every cycle with pending jobs: makes each one take 60 ms.
  hooks.forecast = [&](const ClusterSnapshot&, const std::vector<JobRecord>&,
                       std::vector<int64_t>) {
    {
      std::lock_guard<std::mutex> lock(mu);
      starts.push_back(common::MonotonicSeconds());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
  };
  SchedulerLoop::Options opts;
  opts.heartbeat_interval_ms = 1000;
  opts.period_ms = 20;
  opts.woken_gap_cycles = 4;
  SchedulerLoop loop(db_, opts, clock(), nullptr, nullptr, hooks);
  loop.Start();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  loop.Stop();
  std::lock_guard<std::mutex> lock(mu);
  // A cycle of 60 ms, then 240 ms idle: about 5 in 1.5 s (at the period, 19 would run).
  ASSERT_GE(starts.size(), 3u);
  EXPECT_LE(starts.size(), 7u);
  for (size_t i = 1; i < starts.size(); ++i) {
    EXPECT_GE(starts[i] - starts[i - 1], 0.06 + 0.2) << "cycle " << i;
  }
}

TEST_F(SchedulerLoopTest, FreedCapacityStartsACycleWithoutTheGap) {
  std::atomic<int> cycles{0};
  SchedulerLoop::Options opts;
  opts.heartbeat_interval_ms = 1000;
  opts.period_ms = 600'000;  // only wakes start cycles
  opts.woken_gap_ms = 2'000;
  SchedulerLoop loop(db_, opts, clock(), nullptr, [&](const CycleStats&) { ++cycles; });
  loop.Start();
  loop.Wake();  // the first cycle
  auto wait_for = [&](int n) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(1000);
    while (cycles.load() < n && std::chrono::steady_clock::now() < end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return cycles.load() >= n;
  };
  ASSERT_TRUE(wait_for(1));
  // New work within the gap waits for it; freed capacity does not, and takes that work along.
  loop.Wake();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(cycles.load(), 1);
  loop.WakeForCapacity();
  EXPECT_TRUE(wait_for(2)) << "a job's end waited for the submissions' gap";
  loop.Stop();
}

}  // namespace
}  // namespace controlplane::service
