// The job watcher and reconciliation on real processes: a watcher stops a job whose agent is gone
// and leaves alone one that was released; a restarted JobRunner stops what a record names,
// reports it lost and holds its launch.
#include "agent/jobs/job_watcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include <gtest/gtest.h>

#include "agent/jobs/job_record.h"
#include "agent/jobs/job_runner.h"
#include "agent/sandbox/spawn.h"
#include "agent/testing/test_util.h"

namespace agent {
namespace {

using std::chrono::milliseconds;

// A job stand-in: a shell in a new session with a child of its own (so the tree has depth).
// The test process is its parent and reaps it in a thread, as init would once its agent is gone.
struct FakeJob {
  explicit FakeJob(const std::string& dir) {
    SpawnRequest req;
    req.argv = {"/bin/sh", "-c", "sleep 300 & wait"};
    req.env = {"PATH=/usr/bin:/bin"};
    req.output_path = dir + "/fake-job.log";
    auto pid = SpawnInNewSession(req);
    EXPECT_TRUE(pid.ok()) << pid.status().ToString();
    launcher = ProcessIdOf(*pid);
    reaper = std::thread([p = *pid] { ::waitpid(p, nullptr, 0); });
    for (int i = 0; i < 100 && Alive().size() < 2; ++i) {
      std::this_thread::sleep_for(milliseconds(10));
    }
  }
  ~FakeJob() {
    ::kill(-launcher.pid, SIGKILL);
    reaper.join();
  }
  JobProcesses Processes() const {
    JobProcesses p;
    p.job_id = 7;
    p.launcher = launcher;
    return p;
  }
  std::vector<ProcessId> Alive() const { return FindJobProcesses(Processes()); }

  ProcessId launcher;
  std::thread reaper;
};

bool GoneWithin(const FakeJob& job, milliseconds limit) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (job.Alive().empty()) return true;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return false;
}

TEST(JobWatcherTest, StopsTheJobWhenItsAgentIsGoneAfterTheGrace) {
  TempDir dir;
  FakeJob job(dir.path());
  ASSERT_EQ(job.Alive().size(), 2u);
  // The agent's side of the pipe, closed without a word: as when the agent is SIGKILLed.
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  SpawnRequest req;
  req.argv = {EMBODY_AGENT_BINARY, "watch-job", "--agent-fd", std::to_string(fds[0]),
              "--grace-ms", "300", "--kill-grace-ms", "1000", "--job",
              ToJson(job.Processes()).dump()};
  req.env = {"PATH=/usr/bin:/bin"};
  req.output_path = dir.path() + "/watcher.log";
  req.keep_fd = fds[0];
  auto watcher = SpawnInNewSession(req);
  ASSERT_TRUE(watcher.ok()) << watcher.status().ToString();
  ::close(fds[0]);
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_EQ(job.Alive().size(), 2u) << "the watcher acted while its agent was there";
  ::close(fds[1]);
  // Not before the grace...
  std::this_thread::sleep_for(milliseconds(150));
  EXPECT_EQ(job.Alive().size(), 2u) << "stopped before the grace";
  // ...and soon after it (sh and sleep die on SIGTERM).
  EXPECT_TRUE(GoneWithin(job, milliseconds(3000)));
  int status = 0;
  ASSERT_EQ(::waitpid(*watcher, &status, 0), *watcher);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_NE(ReadAll(dir.path() + "/watcher.log").find("agent gone"), std::string::npos);
}

TEST(JobWatcherTest, ReleasedWatcherLeavesTheJobAlone) {
  TempDir dir;
  FakeJob job(dir.path());
  auto watcher = JobWatcher::Start(EMBODY_AGENT_BINARY, dir.path() + "/watcher.log",
                                   job.Processes(), milliseconds(0), milliseconds(100));
  ASSERT_TRUE(watcher.ok()) << watcher.status().ToString();
  const ProcessId id = (*watcher)->id();
  EXPECT_TRUE(IsAlive(id));
  (*watcher)->Release();
  EXPECT_FALSE(IsAlive(id));  // exited and reaped
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(job.Alive().size(), 2u);
}

TEST(JobWatcherTest, BadCommandLinesAreRefused) {
  EXPECT_EQ(WatchJobMain({"--agent-fd", "3"}), 2);
  EXPECT_EQ(WatchJobMain({"--agent-fd", "x", "--grace-ms", "1", "--kill-grace-ms", "1", "--job",
                          "{}"}),
            2);
  // A record that names root's uid or a cgroup outside /sys/fs/cgroup is never acted on.
  JobProcesses p;
  p.job_id = 1;
  p.uid = 0;
  EXPECT_FALSE(ParseJobProcesses(ToJson(p)).ok());
  p.uid = 1234;
  p.cgroup_dirs = {"/sys/fs/cgroup/memory/../../etc"};
  EXPECT_FALSE(ParseJobProcesses(ToJson(p)).ok());
  p.cgroup_dirs = {"/sys/fs/cgroup/memory/embody-x/job-1"};
  auto ok = ParseJobProcesses(ToJson(p));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->uid, 1234u);
  EXPECT_EQ(ok->cgroup_dirs, p.cgroup_dirs);
}

TEST(JobRecordsTest, RoundTripAndUnreadableRecordsAreDropped) {
  TempDir dir;
  JobRecords records(dir.path() + "/running");
  JobRecord r;
  r.job_id = 5;
  r.attempt = 2;
  r.tenant = "t";
  r.finished = api::FinishedJob{5, 3, "exited with code 3", false, false};
  ASSERT_TRUE(records.Save(r).ok());
  ASSERT_TRUE(common::WriteFileAtomic(records.PathFor(6), "{not json").ok());
  auto all = records.LoadAll();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].attempt, 2);
  ASSERT_TRUE(all[0].finished.has_value());
  EXPECT_EQ(all[0].finished->reason, "exited with code 3");
  EXPECT_FALSE(std::filesystem::exists(records.PathFor(6)));
  records.Remove(5);
  EXPECT_TRUE(records.LoadAll().empty());
}

TEST(JobRunnerReconcileTest, StopsWhatARecordNamesReportsItLostAndHoldsItsLaunch) {
  TempDir dir;
  ASSERT_TRUE(PrepareDataDir(dir.path(), false).ok());
  FakeJob job(dir.path());
  JobRecords records(dir.path() + "/running");
  JobRecord running;
  running.job_id = 7;
  running.attempt = 1;
  running.tenant = "default";
  running.processes = job.Processes();
  ASSERT_TRUE(records.Save(running).ok());
  JobRecord ended;
  ended.job_id = 8;
  ended.attempt = 0;
  ended.finished = api::FinishedJob{8, 0, "exited with code 0", false, false};
  ASSERT_TRUE(records.Save(ended).ok());

  RankLogs logs;
  JobRunnerOptions o;
  o.jobs.data_dir = dir.path();
  o.jobs.kill_grace = milliseconds(1000);
  o.jobs.sandbox.switch_uid = false;
  JobRunner runner(o, &logs);
  EXPECT_EQ(runner.Reconcile(), 2);
  EXPECT_TRUE(job.Alive().empty());
  auto unreported = runner.Unreported();
  ASSERT_EQ(unreported.size(), 2u);
  for (const auto& f : unreported) {
    if (f.job_id == 7) {
      EXPECT_TRUE(f.lost);
      EXPECT_NE(f.reason.find("agent restarted"), std::string::npos) << f.reason;
    } else {
      EXPECT_FALSE(f.lost);
      EXPECT_EQ(f.reason, "exited with code 0");
    }
  }
  // The server repeats the launch of attempt 1 until it hears: nothing starts.
  api::Command again;
  again.job_id = 7;
  again.attempt = 1;
  runner.Launch(again);
  EXPECT_TRUE(runner.Running().empty());
  auto held = runner.HeldLaunches();
  EXPECT_NE(std::find(held.begin(), held.end(), api::LaunchAck{7, 1}), held.end());
  // Once the server has heard, the records go.
  runner.Acknowledge({7, 8});
  EXPECT_TRUE(records.LoadAll().empty());
}

TEST(JobDirRetentionTest, DirectoriesOfJobsNoLongerHeldGoOnceOld) {
  TempDir dir;
  ASSERT_TRUE(PrepareDataDir(dir.path(), false).ok());
  auto make = [&](const std::string& kind, int64_t id, bool old) {
    const std::string d = dir.path() + "/" + kind + "/job-" + std::to_string(id);
    std::filesystem::create_directories(d + "/sub");
    if (old) {
      std::filesystem::last_write_time(
          d, std::filesystem::file_time_type::clock::now() - std::chrono::hours(50));
    }
    return d;
  };
  const std::string old_job = make("jobs", 40, true), old_logs = make("logs", 40, true);
  const std::string old_ckpt = make("checkpoints", 40, true);
  const std::string fresh = make("jobs", 41, false);
  const std::string held = make("jobs", 42, true);
  const std::string not_a_job = dir.path() + "/jobs/job-x";
  std::filesystem::create_directories(not_a_job);
  std::filesystem::last_write_time(
      not_a_job, std::filesystem::file_time_type::clock::now() - std::chrono::hours(50));
  JobRecords records(dir.path() + "/running");
  JobRecord r;
  r.job_id = 42;
  r.finished = api::FinishedJob{42, 0, "exited with code 0", false, false};
  ASSERT_TRUE(records.Save(r).ok());  // not yet acknowledged by the server

  RankLogs logs;
  JobRunnerOptions o;
  o.jobs.data_dir = dir.path();
  o.jobs.sandbox.switch_uid = false;
  JobRunner runner(o, &logs);
  EXPECT_EQ(runner.PruneFinishedDirs(std::chrono::hours(48)), 3);
  EXPECT_FALSE(std::filesystem::exists(old_job));
  EXPECT_FALSE(std::filesystem::exists(old_logs));
  EXPECT_FALSE(std::filesystem::exists(old_ckpt));
  EXPECT_TRUE(std::filesystem::exists(fresh));
  EXPECT_TRUE(std::filesystem::exists(held));
  EXPECT_TRUE(std::filesystem::exists(not_a_job));
  EXPECT_EQ(runner.PruneFinishedDirs(std::chrono::hours(48)), 0);
  // Once acknowledged, the held job's directory goes too.
  ASSERT_EQ(runner.Reconcile(), 1);
  runner.Acknowledge({42});
  EXPECT_EQ(runner.PruneFinishedDirs(std::chrono::hours(48)), 1);
  EXPECT_FALSE(std::filesystem::exists(held));
}

}  // namespace
}  // namespace agent
