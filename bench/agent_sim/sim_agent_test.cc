#include "bench/agent_sim/sim_agent.h"

#include <cmath>
#include <map>

#include <gtest/gtest.h>

namespace bench {
namespace {

struct Recorder : JobObserver {
  void Launched(int64_t job_id, double now) override { launched[job_id] = now; }
  void Finished(int64_t job_id, int exit_code, double now) override {
    finished[job_id] = exit_code;
  }
  std::map<int64_t, double> launched;
  std::map<int64_t, int> finished;
};

api::HeartbeatResponse Launch(int64_t job, int attempt) {
  api::Command c;
  c.type = api::Command::Type::kLaunch;
  c.job_id = job;
  c.attempt = attempt;
  c.hosts.push_back({1, "n", "10.0.0.1", 1});
  return {{c}};
}

TEST(SimAgentTest, RunsALaunchForItsTimeAndReportsItsEndWithTwoSteps) {
  SimAgent a("n", /*job_seconds=*/2);
  Recorder r;
  a.Commit(a.Build(0), Launch(7, 0), /*now=*/10, &r);
  EXPECT_EQ(r.launched.at(7), 10);
  EXPECT_DOUBLE_EQ(a.NextJobEnd(), 12);

  api::HeartbeatRequest running = a.Build(11);
  EXPECT_TRUE(running.has_launched);
  ASSERT_EQ(running.launched.size(), 1u);
  EXPECT_EQ(running.launched[0], (api::LaunchAck{7, 0}));
  EXPECT_EQ(running.running, std::vector<int64_t>{7});
  ASSERT_EQ(running.events.size(), 1u);
  EXPECT_EQ(running.events[0].data.at("step"), 1);
  EXPECT_TRUE(running.finished.empty());
  a.Commit(running, {}, 11, &r);

  api::HeartbeatRequest ended = a.Build(12.5);
  EXPECT_TRUE(ended.running.empty());
  ASSERT_EQ(ended.finished.size(), 1u);
  EXPECT_EQ(ended.finished[0].exit_code, 0);
  EXPECT_FALSE(ended.finished[0].killed);
  ASSERT_EQ(ended.events.size(), 1u);  // step 1 was committed; only step 2 is left
  EXPECT_EQ(ended.events[0].data.at("step"), 2);
  ASSERT_EQ(ended.logs.size(), 1u);
  EXPECT_EQ(r.finished.count(7), 0u);  // not until the server answers

  a.Commit(ended, {}, 12.6, &r);
  EXPECT_EQ(r.finished.at(7), 0);
  EXPECT_EQ(a.held(), 0);
  EXPECT_TRUE(std::isinf(a.NextJobEnd()));
}

TEST(SimAgentTest, AFailedHeartbeatResendsTheSameReports) {
  SimAgent a("n", 0);
  Recorder r;
  a.Commit(a.Build(0), Launch(3, 1), 1, &r);
  api::HeartbeatRequest first = a.Build(2);  // never answered
  api::HeartbeatRequest again = a.Build(3);
  EXPECT_EQ(again.finished.size(), first.finished.size());
  EXPECT_EQ(again.events.size(), first.events.size());
  EXPECT_EQ(again.launched, first.launched);
  EXPECT_TRUE(r.finished.empty());
}

TEST(SimAgentTest, RepeatedLaunchesAreNoOpsAndKillEndsTheJobAsKilled) {
  SimAgent a("n", 100);
  Recorder r;
  a.Commit(a.Build(0), Launch(5, 0), 1, &r);
  a.Commit(a.Build(2), Launch(5, 0), 2, &r);  // the ack was in flight
  EXPECT_EQ(a.repeated_launches(), 1);
  EXPECT_EQ(a.held(), 1);

  api::Command kill;
  kill.type = api::Command::Type::kKill;
  kill.job_id = 5;
  a.Commit(a.Build(3), {{kill}}, 3, &r);
  api::HeartbeatRequest ended = a.Build(4);
  ASSERT_EQ(ended.finished.size(), 1u);
  EXPECT_EQ(ended.finished[0].exit_code, 137);
  EXPECT_TRUE(ended.finished[0].killed);
  a.Commit(ended, {}, 4, &r);
  EXPECT_EQ(r.finished.at(5), 137);
  // The same attempt launched again after its end was acknowledged is not run twice.
  a.Commit(a.Build(5), Launch(5, 0), 5, &r);
  EXPECT_EQ(a.held(), 0);
  EXPECT_EQ(a.repeated_launches(), 2);
  // A new attempt (a restart) is.
  a.Commit(a.Build(6), Launch(5, 1), 6, &r);
  EXPECT_EQ(a.held(), 1);
}

TEST(SimAgentTest, ASleepCommandRunsForItsSecondsAndOtherJobsForTheDefault) {
  SimAgent a("n", /*job_seconds=*/2);
  Recorder r;
  api::HeartbeatResponse sleep = Launch(1, 0);
  sleep.commands[0].spec = {{"kind", "command"}, {"command", {"sleep", "0.75"}}};
  a.Commit(a.Build(0), sleep, 10, &r);
  EXPECT_DOUBLE_EQ(a.NextJobEnd(), 10.75);

  SimAgent b("n", 2);
  api::HeartbeatResponse odd = Launch(2, 0);
  odd.commands[0].spec = {{"kind", "command"}, {"command", {"sleep", "3s"}}};  // not a number
  b.Commit(b.Build(0), odd, 10, &r);
  EXPECT_DOUBLE_EQ(b.NextJobEnd(), 12);
}

TEST(SimAgentTest, WorkerAssignmentsAreHeldAndListedNotRun) {
  SimAgent a("n", 1);
  Recorder r;
  api::Command worker;
  worker.type = api::Command::Type::kWorker;
  worker.job_id = 9;
  worker.attempt = 2;
  a.Commit(a.Build(0), {{worker}}, 1, &r);
  EXPECT_EQ(a.held(), 0);
  EXPECT_TRUE(r.launched.empty());
  api::HeartbeatRequest next = a.Build(2);
  EXPECT_TRUE(next.has_workers);
  EXPECT_EQ(next.workers, (std::vector<api::LaunchAck>{{9, 2}}));
  EXPECT_TRUE(next.finished.empty());
  // A reply without it: the job is gone, and so is the assignment.
  a.Commit(next, {}, 2, &r);
  EXPECT_TRUE(a.Build(3).workers.empty());
}

}  // namespace
}  // namespace bench
