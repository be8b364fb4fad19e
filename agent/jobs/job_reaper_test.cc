// The reaper alone, on plain forked processes standing in for mpirun and its ranks (no sandbox,
// no cgroup): what is left of a job's session dies with its launcher, the exit is described, the
// download goes, and a kill's two halves reach a tree that ignores SIGTERM.
#include "agent/jobs/job_reaper.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "common/file_util.h"

namespace agent {
namespace {

// Alive and not a zombie (a dead child of ours, or of init, may linger as one).
bool Running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

class JobReaperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/embody-reaper-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
    options_.jobs.data_dir = dir_;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A launcher in a session of its own with one "rank" below it; both ignore SIGTERM when
  // `stubborn`. The launcher exits with `code` once its rank runs unless it is to wait too.
  // Returns the launcher's pid; the rank's is in *rank.
  static pid_t StartLauncher(bool stubborn, bool exit_at_once, int code, pid_t* rank) {
    int fds[2];
    if (::pipe(fds) != 0) return -1;
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setsid();
      if (stubborn) ::signal(SIGTERM, SIG_IGN);
      pid_t r = ::fork();
      if (r == 0) {
        for (;;) ::pause();
      }
      (void)!::write(fds[1], &r, sizeof r);
      if (exit_at_once) ::_exit(code);
      for (;;) ::pause();
    }
    ::close(fds[1]);
    if (::read(fds[0], rank, sizeof *rank) != sizeof *rank) *rank = -1;
    ::close(fds[0]);
    return pid;
  }

  std::string dir_;
  JobRunnerOptions options_;
  RankLogs logs_;
  UidPool uids_{SandboxOptions{}};
};

TEST_F(JobReaperTest, WhatIsLeftOfTheSessionDiesWithTheLauncher) {
  JobReaper reaper(options_, &logs_, uids_);
  HeldJob job;
  job.id = 12;
  pid_t rank = 0;
  job.pid = StartLauncher(/*stubborn=*/false, /*exit_at_once=*/true, 3, &rank);
  ASSERT_GT(job.pid, 0);
  ASSERT_GT(rank, 0);
  std::filesystem::create_directories(options_.jobs.DownloadDir(12));
  ASSERT_TRUE(
      common::WriteFileAtomic(options_.jobs.DownloadDir(12) + "/step-1.ckpt", "x", 0600).ok());
  ExitDescription d = reaper.Reap(&job, [] { return std::vector<ProcessId>{}; });
  EXPECT_EQ(d.exit_code, 3);
  EXPECT_EQ(d.reason, "exited with code 3");
  EXPECT_FALSE(Running(rank));  // the rank outlived its launcher, not its job
  EXPECT_FALSE(std::filesystem::exists(options_.jobs.DownloadDir(12)));
}

TEST_F(JobReaperTest, AKillReachesATreeThatIgnoresSigterm) {
  options_.jobs.kill_grace = std::chrono::milliseconds(0);
  JobReaper reaper(options_, &logs_, uids_);
  HeldJob job;
  job.id = 13;
  pid_t rank = 0;
  job.pid = StartLauncher(/*stubborn=*/true, /*exit_at_once=*/false, 0, &rank);
  ASSERT_GT(job.pid, 0);
  ASSERT_GT(rank, 0);
  std::vector<ProcessId> tree = JobReaper::Tree(job);
  ASSERT_EQ(tree.size(), 2u);
  reaper.Terminate(job, tree);  // SIGTERM to the rank only: ignored
  ::usleep(50 * 1000);
  EXPECT_TRUE(Running(job.pid));
  EXPECT_TRUE(Running(rank));
  reaper.KillSurvivors(job, tree);
  ExitDescription d = reaper.Reap(&job, [&] { return tree; });
  EXPECT_EQ(d.exit_code, 128 + SIGKILL);
  EXPECT_EQ(d.reason, "killed by signal 9");
  EXPECT_FALSE(Running(rank));
}

}  // namespace
}  // namespace agent
