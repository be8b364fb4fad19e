// Launches real jobs under Open MPI's mpirun (ctest label "mpi"); no server: the test plays the
// server's part by calling the JobRunner directly.
#include "agent/jobs/job_runner.h"

#include <signal.h>
#include <unistd.h>

#include <thread>

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include "agent/node/node_collector.h"
#include "agent/testing/test_util.h"

namespace agent {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class JobRunnerTest : public ::testing::Test {
 protected:
  JobRunnerTest() { EXPECT_TRUE(PrepareDataDir(dir_.path(), ::geteuid() == 0).ok()); }

  JobRunnerOptions Options() {
    JobRunnerOptions o;
    o.jobs.data_dir = dir_.path();
    o.agent_url = "http://127.0.0.1:1";
    o.jobs.kill_grace = milliseconds(1500);
    o.jobs.rank_exec = EMBODY_AGENT_BINARY;
    o.jobs.sandbox.switch_uid = ::geteuid() == 0;
    o.jobs.sandbox.uid_base = 400000 + static_cast<uid_t>(::getpid() % 5000) * 100;
    o.jobs.sandbox.uid_count = 100;
    return o;
  }

  static api::Command CommandJob(int64_t id, std::vector<std::string> argv, int ranks) {
    api::Command c;
    c.type = api::Command::Type::kLaunch;
    c.job_id = id;
    c.tenant_id = 1;  // a launch always names its tenant: its jobs run with that tenant's group
    c.tenant = "default";
    c.spec = {{"name", "t"}, {"kind", "command"}, {"command", argv}};
    c.hosts = {{1, "node-a", "127.0.0.1", ranks}};
    return c;
  }

  std::string JobDir(int64_t id) { return dir_.path() + "/jobs/job-" + std::to_string(id); }

  TempDir dir_;
  RankLogs logs_;
};

TEST_F(JobRunnerTest, ReportsTheRanksExitCodeAndCapturesEveryRank) {
  JobRunner runner(Options(), &logs_);
  runner.Launch(CommandJob(
      11,
      {"sh", "-c",
       "echo \"out $OMPI_COMM_WORLD_RANK job=$EMBODY_JOB_ID ckpt=$EMBODY_CHECKPOINT_DIR\"; "
       "echo \"err $OMPI_COMM_WORLD_RANK token=${#EMBODY_JOB_TOKEN}\" >&2; exit 3"},
      2));
  auto done = runner.WaitFinished(11, seconds(30));
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->exit_code, 3);
  EXPECT_EQ(done->reason, "exited with code 3");
  EXPECT_TRUE(runner.Running().empty());
  for (int rank : {0, 1}) {
    std::string log = ReadAll(RankLogs::RankLogPath(runner.LogDir(11), rank));
    std::string r = std::to_string(rank);
    EXPECT_NE(log.find("out " + r + " job=11 ckpt=" + dir_.path() + "/checkpoints/job-11\n"),
              std::string::npos)
        << log;
    EXPECT_NE(log.find("err " + r + " token=64\n"), std::string::npos) << log;
  }
  // The rank output is not duplicated into mpirun's own log (":nocopy").
  std::string launcher = ReadAll(RankLogs::RankLogPath(runner.LogDir(11), -1));
  EXPECT_EQ(launcher.find("out 0"), std::string::npos) << launcher;
  EXPECT_NE(ReadAll(JobDir(11) + "/spec.json").find("\"command\""), std::string::npos);
  EXPECT_EQ(ReadAll(JobDir(11) + "/hostfile"), "127.0.0.1 slots=2\n");

  // Everything is shipped, the finished job is complete, and the next batch is empty.
  auto batch = logs_.NextBatch();
  EXPECT_EQ(batch.complete_jobs.count(11), 1u);
  logs_.Commit(batch.chunks);
  EXPECT_FALSE(logs_.Tracking(11));
  runner.Acknowledge({11});
  EXPECT_TRUE(runner.Unreported().empty());
}

TEST_F(JobRunnerTest, KillLeavesNoProcessBehind) {
  JobRunner runner(Options(), &logs_);
  // Each rank also starts a grandchild in a new session, which neither mpirun nor a
  // process-group kill would reach.
  runner.Launch(CommandJob(12, {"sh", "-c", "setsid sleep 1000 & sleep 1000"}, 2));
  ASSERT_EQ(runner.Running(), std::vector<int64_t>{12});
  pid_t mpirun = runner.LauncherPid(12);
  ASSERT_GT(mpirun, 0);
  // Wait until both ranks and both grandchildren exist.
  std::vector<ProcessId> tree;
  for (int i = 0; i < 200; ++i) {
    tree = JobTree(ListProcesses(), mpirun, mpirun);
    int sleeps = 0;
    for (const auto& p : tree) {
      sleeps += ReadAll("/proc/" + std::to_string(p.pid) + "/comm") == "sleep\n";
    }
    if (sleeps == 4) break;
    std::this_thread::sleep_for(milliseconds(50));
  }
  ASSERT_GE(tree.size(), 5u);  // mpirun, 2 shells, 4 sleeps (one may have exec'ed in place)

  // The launcher is what the node collector sums the job's resource use under.
  auto running = runner.RunningJobs();
  ASSERT_EQ(running.size(), 1u);
  EXPECT_EQ(running[0].job_id, 12);
  EXPECT_EQ(running[0].tenant, "default");
  EXPECT_EQ(running[0].launcher_pid, mpirun);
  JobProcessCollector collector([&] { return std::vector<JobRoot>{{12, "default", mpirun}}; });
  std::string metrics = prometheus::TextSerializer().Serialize(collector.Collect());
  const std::string kRss =
      "\nembody_job_process_resident_memory_bytes{job=\"12\",tenant=\"default\"} ";
  size_t at = metrics.find(kRss);
  ASSERT_NE(at, std::string::npos) << metrics;
  EXPECT_GT(std::stod(metrics.substr(at + kRss.size())), 5e6) << metrics;  // mpirun alone is MBs

  auto start = std::chrono::steady_clock::now();
  runner.Kill(12);
  runner.Kill(12);  // idempotent
  auto done = runner.WaitFinished(12, seconds(20));
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->reason, "killed on cancel");
  EXPECT_NE(done->exit_code, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(10));
  for (const auto& p : tree) EXPECT_FALSE(IsAlive(p)) << "pid " << p.pid << " survived";
  for (const auto& p : ListProcesses()) {
    if (p.state != 'Z') {
      EXPECT_NE(p.sid, mpirun) << "pid " << p.id.pid << " still in session";
    }
  }
  EXPECT_TRUE(runner.Running().empty());
}

// A start forks mpirun without the runner's lock, the job held as preparing meanwhile: a kill in
// that window must still end the job (it is started and then killed), not be lost.
TEST_F(JobRunnerTest, AKillWhileTheJobStartsEndsIt) {
  JobRunner runner(Options(), &logs_);
  for (int64_t id = 30; id < 35; ++id) {
    std::thread launcher([&] { runner.Launch(CommandJob(id, {"sleep", "1000"}, 1)); });
    const auto give_up = std::chrono::steady_clock::now() + seconds(20);
    while (runner.Running().empty() && std::chrono::steady_clock::now() < give_up) {
    }
    runner.Kill(id);
    launcher.join();
    auto done = runner.WaitFinished(id, seconds(20));
    ASSERT_TRUE(done.has_value()) << "job " << id;
    EXPECT_EQ(done->reason, "killed on cancel");
    EXPECT_NE(done->exit_code, 0);
    EXPECT_TRUE(runner.Running().empty());
  }
}

TEST_F(JobRunnerTest, KillEscalatesToSigkillForRanksThatIgnoreSigterm) {
  JobRunner runner(Options(), &logs_);
  runner.Launch(CommandJob(14, {"sh", "-c", "trap '' TERM; sleep 1000"}, 2));
  pid_t mpirun = runner.LauncherPid(14);
  ASSERT_GT(mpirun, 0);
  std::vector<ProcessId> tree;
  for (int i = 0; i < 200 && tree.size() < 5; ++i) {
    std::this_thread::sleep_for(milliseconds(50));
    tree = JobTree(ListProcesses(), mpirun, mpirun);
  }
  ASSERT_GE(tree.size(), 5u);
  runner.Kill(14);
  auto done = runner.WaitFinished(14, seconds(20));
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->reason, "killed on cancel");
  for (const auto& p : tree) EXPECT_FALSE(IsAlive(p)) << "pid " << p.pid << " survived";
}

// resume_from (the checkpoint the job last reported) is handed to the job when the job's uid can
// read it, or its directory (the job's newer checkpoints, the file pruned since); otherwise the
// attempt starts from step 0 and the launcher log says why.
TEST_F(JobRunnerTest, ResumesFromACheckpointOnlyWhereTheJobsUidCanReadIt) {
  TempDir outside;  // the job's uid must be able to pass through it to reach the checkpoints
  ASSERT_EQ(::chmod(outside.path().c_str(), 0755), 0);
  const std::string dir = outside.path() + "/ckpts";
  const std::string file = dir + "/step-5.ckpt";
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  ASSERT_TRUE(common::WriteFileAtomic(file, "5", 0644).ok());
  struct Case {
    mode_t dir_mode, file_mode;
    bool resumes;
  };
  // 0600: root's own file (the agent runs jobs as other uids), but its directory is open to them.
  const Case cases[] = {{0755, 0644, true}, {0755, 0600, true}, {0, 0644, false}};
  int64_t id = 40;
  for (const Case& c : cases) {
    SCOPED_TRACE("directory " + std::to_string(c.dir_mode) + " file " +
                 std::to_string(c.file_mode));
    ASSERT_EQ(::chmod(file.c_str(), c.file_mode), 0);
    ASSERT_EQ(::chmod(dir.c_str(), c.dir_mode), 0);
    JobRunner runner(Options(), &logs_);
    api::Command launch = CommandJob(id, {"sh", "-c", "echo \"from=${EMBODY_RESUME_FROM:-none}\""}, 1);
    launch.resume_from = file;
    runner.Launch(launch);
    auto done = runner.WaitFinished(id, seconds(30));
    ::chmod(dir.c_str(), 0755);
    ASSERT_TRUE(done.has_value());
    EXPECT_EQ(done->exit_code, 0) << done->reason;
    const std::string rank = ReadAll(RankLogs::RankLogPath(runner.LogDir(id), 0));
    const std::string launcher = ReadAll(RankLogs::RankLogPath(runner.LogDir(id), -1));
    if (c.resumes) {
      EXPECT_NE(rank.find("from=" + file + "\n"), std::string::npos) << rank;
      EXPECT_NE(launcher.find("embody-agent: resuming from " + file + "\n"), std::string::npos)
          << launcher;
    } else {
      EXPECT_NE(rank.find("from=none\n"), std::string::npos) << rank;
      EXPECT_NE(launcher.find("embody-agent: checkpoint " + file +
                              " is not readable on this node; starting from step 0\n"),
                std::string::npos)
          << launcher;
    }
    ++id;
  }
}

TEST_F(JobRunnerTest, MissingMpirunIsReportedNotThrown) {
  JobRunnerOptions o = Options();
  o.jobs.mpirun = "/nonexistent/mpirun";
  JobRunner runner(o, &logs_);
  runner.Launch(CommandJob(13, {"true"}, 1));
  auto done = runner.WaitFinished(13, seconds(5));
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->exit_code, 127);
  EXPECT_NE(done->reason.find("cannot execute /nonexistent/mpirun"), std::string::npos)
      << done->reason;
}

TEST_F(JobRunnerTest, DescribesWaitStatus) {
  EXPECT_EQ(DescribeWaitStatus(3 << 8).exit_code, 3);
  EXPECT_EQ(DescribeWaitStatus(3 << 8).reason, "exited with code 3");
  EXPECT_EQ(DescribeWaitStatus(SIGKILL).exit_code, 137);
  EXPECT_EQ(DescribeWaitStatus(SIGKILL).reason, "killed by signal 9");
}

}  // namespace
}  // namespace agent
