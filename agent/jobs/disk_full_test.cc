// A full disk under a job's checkpoints or logs, on a real (small) file system: the job ends with
// a reason that says so, and the runner carries on with the next job. The test mounts a tmpfs of
// its own as the agent's data directory (ctest label "mpi"); where it cannot (not root, no mount
// rights) it skips and says why.
#include <sys/mount.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>

#include <gtest/gtest.h>

#include "agent/jobs/job_runner.h"
#include "agent/testing/test_util.h"

namespace agent {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class DiskFullTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "mounting a small file system needs root";
    data_ = dir_.path() + "/data";
    std::filesystem::create_directories(data_);
    if (::mount("tmpfs", data_.c_str(), "tmpfs", 0, "size=6m,mode=0711") != 0) {
      GTEST_SKIP() << "cannot mount a tmpfs here: " << std::strerror(errno);
    }
    mounted_ = true;
    ASSERT_TRUE(PrepareDataDir(data_, true).ok());
  }
  void TearDown() override {
    if (mounted_) ::umount2(data_.c_str(), MNT_DETACH);
  }

  JobRunnerOptions Options() {
    JobRunnerOptions o;
    o.jobs.data_dir = data_;
    o.agent_url = "http://127.0.0.1:1";
    o.jobs.kill_grace = milliseconds(1000);
    o.jobs.rank_exec = EMBODY_AGENT_BINARY;
    o.jobs.sandbox.switch_uid = true;
    o.jobs.sandbox.uid_base = 420000 + static_cast<uid_t>(::getpid() % 5000) * 100;
    o.jobs.sandbox.uid_count = 100;
    return o;
  }

  static api::Command CommandJob(int64_t id, const std::string& script) {
    api::Command c;
    c.type = api::Command::Type::kLaunch;
    c.job_id = id;
    c.tenant_id = 1;
    c.tenant = "default";
    c.spec = {{"name", "t"}, {"kind", "command"}, {"command", {"sh", "-c", script}}};
    c.hosts = {{1, "node-a", "127.0.0.1", 1}};
    return c;
  }

  TempDir dir_;
  std::string data_;
  bool mounted_ = false;
  RankLogs logs_;
};

TEST_F(DiskFullTest, AFullCheckpointDirectoryIsTheJobsErrorAndTheRunnerCarriesOn) {
  JobRunner runner(Options(), &logs_);
  // The job fills its checkpoint directory until the write fails, as a checkpoint would.
  runner.Launch(CommandJob(
      31, "dd if=/dev/zero of=$EMBODY_CHECKPOINT_DIR/step-1.ckpt bs=64k 2>&1 || exit 1"));
  auto full = runner.WaitFinished(31, seconds(60));
  ASSERT_TRUE(full.has_value());
  EXPECT_EQ(full->exit_code, 1);
  EXPECT_NE(full->reason.find("exited with code 1 (no space left on the file system of " + data_),
            std::string::npos)
      << full->reason;
  EXPECT_FALSE(full->lost);
  runner.Acknowledge({31});

  // Room again (an operator, or retention): the next job runs and its log arrives whole.
  std::filesystem::remove(data_ + "/checkpoints/job-31/step-1.ckpt");
  runner.Launch(CommandJob(32, "echo fine"));
  auto next = runner.WaitFinished(32, seconds(60));
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->exit_code, 0) << next->reason;
  EXPECT_EQ(next->reason, "exited with code 0");
  EXPECT_NE(ReadAll(RankLogs::RankLogPath(runner.LogDir(32), 0)).find("fine"), std::string::npos);
}

TEST_F(DiskFullTest, ALogThatCannotBeWrittenIsSaidInTheReason) {
  JobRunner runner(Options(), &logs_);
  // Root fills the file system first (the job's uid could not write where this file goes), then
  // the job prints: its output has nowhere to go whole.
  const std::string filler = data_ + "/filler";
  {
    std::string block(64 * 1024, 'x');
    FILE* f = std::fopen(filler.c_str(), "w");
    ASSERT_NE(f, nullptr);
    while (std::fwrite(block.data(), 1, block.size(), f) == block.size()) {
    }
    std::fclose(f);
  }
  // Leave a little room, enough for the job's directories but not its output.
  std::filesystem::resize_file(filler, std::filesystem::file_size(filler) - 256 * 1024);
  runner.Launch(CommandJob(33, "i=0; while [ $i -lt 20000 ]; do "
                               "echo line-$i-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; "
                               "i=$((i+1)); done"));
  auto done = runner.WaitFinished(33, seconds(120));
  ASSERT_TRUE(done.has_value());
  EXPECT_NE(done->reason.find("(its log is incomplete: cannot write " + runner.LogDir(33)),
            std::string::npos)
      << done->reason;
  EXPECT_NE(done->reason.find("No space left on device"), std::string::npos) << done->reason;
  runner.Acknowledge({33});
  std::filesystem::remove(filler);
  runner.Launch(CommandJob(34, "echo after"));
  auto after = runner.WaitFinished(34, seconds(60));
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->exit_code, 0) << after->reason;
}

}  // namespace
}  // namespace agent
