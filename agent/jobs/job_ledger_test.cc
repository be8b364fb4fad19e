// The ledger alone: what the heartbeat is told of held, running and ended jobs, what an
// acknowledgement removes (the record included) and remembers, a restarted agent's view of the
// records an earlier one left, and the retention of finished jobs' directories. No process is
// started.
#include "agent/jobs/job_ledger.h"

#include <signal.h>
#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "common/file_util.h"

namespace agent {
namespace {

class JobLedgerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/embody-ledger-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
    jobs_.data_dir = dir_;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static std::unique_ptr<HeldJob> Held(int64_t id, int attempt, bool running) {
    auto job = std::make_unique<HeldJob>();
    job->id = id;
    job->attempt = attempt;
    job->from_launch = true;
    job->tenant = "acme";
    job->running = running;
    if (!running) job->result = {id, 3, "exited with code 3"};
    return job;
  }

  std::string dir_;
  JobSandboxOptions jobs_;
};

TEST_F(JobLedgerTest, ReportsHeldRunningAndEndedJobs) {
  JobLedger ledger(dir_ + "/running");
  HeldJob* running = ledger.Add(Held(1, 2, true));
  running->pid = 4242;
  ledger.Add(Held(2, 1, false));
  HeldJob* preparing = ledger.Add(Held(3, 1, true));  // no launcher yet
  EXPECT_EQ(ledger.Find(3), preparing);
  EXPECT_EQ(ledger.Find(9), nullptr);
  EXPECT_EQ(ledger.Running(), (std::vector<int64_t>{1, 3}));
  EXPECT_TRUE(ledger.AnyRunning());
  EXPECT_EQ(ledger.Held(), (std::set<int64_t>{1, 2, 3}));
  std::vector<api::LaunchAck> acks = ledger.HeldLaunches();
  ASSERT_EQ(acks.size(), 3u);
  EXPECT_EQ(acks[0].job_id, 1);
  EXPECT_EQ(acks[0].attempt, 2);
  std::vector<RunningJob> started = ledger.RunningJobs();
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].job_id, 1);
  EXPECT_EQ(started[0].launcher_pid, 4242);
  std::vector<api::FinishedJob> ended = ledger.Unreported();
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].job_id, 2);
  EXPECT_EQ(ended[0].attempt, 1);
  EXPECT_EQ(ended[0].exit_code, 3);
}

TEST_F(JobLedgerTest, AnAcknowledgementRemovesEndedJobsAndTheirRecordsAndIsRemembered) {
  JobLedger ledger(dir_ + "/running");
  ledger.Add(Held(1, 1, true));
  HeldJob* ended = ledger.Add(Held(2, 1, false));
  ended->ended = true;
  ASSERT_TRUE(SaveJobRecord(ledger.records(), *ended).ok());
  ASSERT_TRUE(std::filesystem::exists(ledger.records().PathFor(2)));
  // A running job and an unknown one are not taken.
  std::vector<std::unique_ptr<HeldJob>> done = ledger.TakeAcknowledged({1, 2, 7});
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0]->id, 2);
  EXPECT_FALSE(std::filesystem::exists(ledger.records().PathFor(2)));
  EXPECT_EQ(ledger.Find(2), nullptr);
  EXPECT_NE(ledger.Find(1), nullptr);
  EXPECT_TRUE(ledger.WasAcknowledged(2));
  EXPECT_FALSE(ledger.WasAcknowledged(1));
  ledger.ForgetAcknowledged(2);  // launched again
  EXPECT_FALSE(ledger.WasAcknowledged(2));
}

TEST_F(JobLedgerTest, OnlyTheLatestAcknowledgementsAreRemembered) {
  JobLedger ledger(dir_ + "/running");
  const int64_t n = JobLedger::kRememberAcknowledged + 1;
  for (int64_t id = 1; id <= n; ++id) {
    ledger.Add(Held(id, 1, false));
    ledger.TakeAcknowledged({id});
  }
  EXPECT_FALSE(ledger.WasAcknowledged(1));
  EXPECT_TRUE(ledger.WasAcknowledged(2));
  EXPECT_TRUE(ledger.WasAcknowledged(n));
}

TEST_F(JobLedgerTest, AReconciledJobIsReportedAsItEndedOrAsLost) {
  JobRecord finished;
  finished.job_id = 4;
  finished.attempt = 2;
  finished.tenant = "acme";
  finished.finished = api::FinishedJob{0, 0, "exited with code 0"};
  std::unique_ptr<HeldJob> job = ReconciledJob(finished, jobs_, nullptr);
  EXPECT_TRUE(job->ended);
  EXPECT_FALSE(job->running);
  EXPECT_TRUE(job->from_launch);
  EXPECT_EQ(job->result.job_id, 4);
  EXPECT_EQ(job->result.reason, "exited with code 0");
  EXPECT_FALSE(job->result.lost);

  // Held but never started: nothing to stop, its download goes, and the server hears it was lost.
  JobRecord held;
  held.job_id = 5;
  held.attempt = 1;
  std::filesystem::create_directories(jobs_.DownloadDir(5));
  ASSERT_TRUE(common::WriteFileAtomic(jobs_.DownloadDir(5) + "/step-1.ckpt", "x", 0600).ok());
  job = ReconciledJob(held, jobs_, nullptr);
  EXPECT_TRUE(job->result.lost);
  EXPECT_EQ(job->result.exit_code, 128 + SIGKILL);
  EXPECT_EQ(job->result.reason,
            "lost: the agent restarted while the job ran, and stopped 0 of its processes");
  EXPECT_FALSE(std::filesystem::exists(jobs_.DownloadDir(5)));
}

TEST_F(JobLedgerTest, PruningRemovesOldDirectoriesOfJobsNoOneHolds) {
  for (const char* kind : {"jobs", "logs"}) {
    for (int id : {1, 2, 3}) {
      std::filesystem::create_directories(dir_ + "/" + kind + "/job-" + std::to_string(id));
    }
  }
  std::filesystem::create_directories(dir_ + "/jobs/other");
  std::filesystem::create_directories(dir_ + "/elsewhere");
  std::filesystem::create_directory_symlink(dir_ + "/elsewhere", dir_ + "/jobs/job-4");
  // Nothing is old enough yet.
  EXPECT_EQ(PruneJobDirs(dir_, {2}, std::chrono::hours(1)), 0);
  // Held job 2 stays, as do a directory not named for a job and a link (never followed).
  EXPECT_EQ(PruneJobDirs(dir_, {2}, std::chrono::seconds(-1)), 4);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/jobs/job-1"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/logs/job-3"));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/jobs/job-2"));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/logs/job-2"));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/jobs/other"));
  EXPECT_TRUE(std::filesystem::is_symlink(dir_ + "/jobs/job-4"));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/elsewhere"));
}

}  // namespace
}  // namespace agent
