// The scrub of a finished job's uid, on a scratch tree of the test's own (never the node's real
// /tmp) plus real System V objects; needs root to own files as other uids (CI runs as root).
#include "agent/sandbox/uid_scrub.h"

#include "agent/sandbox/sandbox.h"

#include <fcntl.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace agent {
namespace {

namespace fs = std::filesystem;

class UidScrubTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to own files as job uids; CI runs as root";
    root_ = fs::temp_directory_path() / ("uid-scrub-" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
    fs::permissions(root_, fs::perms::all | fs::perms::sticky_bit);
  }
  void TearDown() override {
    if (!root_.empty()) fs::remove_all(root_);
  }
  void Write(const fs::path& p, uid_t owner) {
    std::ofstream(p) << "secret";
    ASSERT_EQ(::lchown(p.c_str(), owner, owner), 0) << p;
  }
  void Dir(const fs::path& p, uid_t owner, fs::perms perms = fs::perms::all) {
    fs::create_directories(p);
    fs::permissions(p, perms);
    ASSERT_EQ(::lchown(p.c_str(), owner, owner), 0) << p;
  }
  uid_t Owner(const fs::path& p) {
    struct stat st;
    EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
    return st.st_uid;
  }

  static constexpr uid_t kJob = 390001;    // the finished job
  static constexpr uid_t kOther = 390002;  // a job still running
  fs::path root_;
};

TEST_F(UidScrubTest, RemovesWhatTheUidOwnsAndNothingElse) {
  Write(root_ / "job-file", kJob);
  Write(root_ / "other-file", kOther);
  Write(root_ / "root-file", 0);
  // A tree of the job's own, with a link to a root file: the link goes, its target stays.
  Dir(root_ / "job-dir" / "deep" / "deeper", kJob);
  Dir(root_ / "job-dir" / "deep", kJob);
  Dir(root_ / "job-dir", kJob);
  Write(root_ / "job-dir" / "deep" / "deeper" / "f", kJob);
  fs::create_symlink(root_ / "root-file", root_ / "job-dir" / "link");
  ASSERT_EQ(::lchown((root_ / "job-dir" / "link").c_str(), kJob, kJob), 0);
  // The job's file inside another job's world-writable directory.
  Dir(root_ / "other-dir", kOther);
  Write(root_ / "other-dir" / "job-file", kJob);
  Write(root_ / "other-dir" / "other-file", kOther);
  // The job's world-writable directory that the other job put a file into: kept, given to root.
  Dir(root_ / "shared-dir", kJob);
  Write(root_ / "shared-dir" / "other-file", kOther);
  Write(root_ / "shared-dir" / "job-file", kJob);

  ScrubReport r = ScrubUids({kJob}, {root_.string()}, /*system_v=*/false);

  EXPECT_FALSE(fs::exists(root_ / "job-file"));
  EXPECT_FALSE(fs::exists(fs::symlink_status(root_ / "job-dir")));
  EXPECT_TRUE(fs::exists(root_ / "root-file"));
  EXPECT_TRUE(fs::exists(root_ / "other-file"));
  EXPECT_FALSE(fs::exists(root_ / "other-dir" / "job-file"));
  EXPECT_TRUE(fs::exists(root_ / "other-dir" / "other-file"));
  EXPECT_EQ(Owner(root_ / "other-dir"), kOther);
  EXPECT_FALSE(fs::exists(root_ / "shared-dir" / "job-file"));
  EXPECT_TRUE(fs::exists(root_ / "shared-dir" / "other-file"));
  EXPECT_EQ(Owner(root_ / "shared-dir"), 0u);
  EXPECT_EQ(r.given_to_root, 1);
  EXPECT_EQ(r.errors, 0);
  // job-file, the deep tree (f, deeper, deep, link, job-dir), other-dir/job-file,
  // shared-dir/job-file.
  EXPECT_EQ(r.removed, 8);
  EXPECT_TRUE(fs::exists(root_));
}

TEST_F(UidScrubTest, KeptDirectoriesAreNeverEntered) {
  // The agent's data directory under a scratch root: the job's checkpoints there are its uid's.
  Dir(root_ / "agent-data" / "checkpoints", 0);
  Write(root_ / "agent-data" / "checkpoints" / "step-120.ckpt", kJob);
  Write(root_ / "job-file", kJob);
  ScrubReport r = ScrubUids({kJob}, {root_.string()}, false, {(root_ / "agent-data").string()});
  EXPECT_TRUE(fs::exists(root_ / "agent-data" / "checkpoints" / "step-120.ckpt"));
  EXPECT_FALSE(fs::exists(root_ / "job-file"));
  EXPECT_EQ(r.removed, 1);
}

TEST_F(UidScrubTest, AnotherAgentsDataDirectoryIsNeverEntered) {
  // Another agent of this machine, given the same uid for a job of its own: its fresh job
  // directory is the uid's and holds root's launch files.
  Dir(root_ / "other-agent" / "jobs" / "7", kJob, fs::perms::owner_all);
  Write(root_ / "other-agent" / "jobs" / "7" / "spec.json", 0);
  Write(root_ / "other-agent" / kAgentDataMarker, 0);
  // The same layout whose marker a job wrote is walked as any other directory.
  Dir(root_ / "planted" / "jobs" / "7", kJob, fs::perms::owner_all);
  Write(root_ / "planted" / "jobs" / "7" / "spec.json", 0);
  Write(root_ / "planted" / kAgentDataMarker, kJob);
  Write(root_ / "job-file", kJob);
  ScrubReport r = ScrubUids({kJob}, {root_.string()}, false);
  EXPECT_EQ(Owner(root_ / "other-agent" / "jobs" / "7"), kJob);
  EXPECT_TRUE(fs::exists(root_ / "other-agent" / "jobs" / "7" / "spec.json"));
  EXPECT_EQ(Owner(root_ / "planted" / "jobs" / "7"), 0u);  // given to root: others' file inside
  EXPECT_FALSE(fs::exists(root_ / "planted" / kAgentDataMarker));
  EXPECT_FALSE(fs::exists(root_ / "job-file"));
  EXPECT_EQ(r.given_to_root, 1);
}

TEST_F(UidScrubTest, PrepareDataDirMarksItForOtherAgents) {
  const fs::path data = root_ / "agent-data";
  ASSERT_TRUE(PrepareDataDir(data.string(), /*switch_uid=*/true).ok());
  struct stat st;
  ASSERT_EQ(::lstat((data / kAgentDataMarker).c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_uid, 0u);
}

TEST_F(UidScrubTest, ScrubsSeveralUidsInOneWalk) {
  Write(root_ / "job-file", kJob);
  Write(root_ / "other-file", kOther);
  Write(root_ / "root-file", 0);
  Dir(root_ / "other-dir", kOther);
  Write(root_ / "other-dir" / "job-file", kJob);
  ScrubReport r = ScrubUids({kJob, kOther, 0}, {root_.string()}, /*system_v=*/false);
  EXPECT_EQ(r.removed, 4);
  EXPECT_TRUE(fs::exists(root_ / "root-file"));
  EXPECT_FALSE(fs::exists(root_ / "other-dir"));
}

// A released uid goes back to the pool only after the walk: whenever Acquire hands it out again,
// what it left is already gone. The many files make the walk long enough that a pool releasing
// first and scrubbing after would be caught handing it out early.
TEST_F(UidScrubTest, APoolHandsAUidOutAgainOnlyOnceScrubbed) {
  for (int i = 0; i < 3000; ++i) Write(root_ / ("f" + std::to_string(i)), 0);
  SandboxOptions o;
  o.uid_base = kJob;
  o.uid_count = 1;
  UidPool pool(o);
  pool.ScrubBeforeReuse({root_.string()}, {});
  for (int round = 0; round < 5; ++round) {
    auto uid = pool.Acquire(1);
    ASSERT_TRUE(uid.ok()) << uid.status().message();
    ASSERT_EQ(*uid, kJob);
    Write(root_ / "left-behind", kJob);
    pool.Release(kJob);
    bool handed_out = false;
    while (!handed_out) {
      auto again = pool.Acquire(1);
      if (again.ok()) {
        handed_out = true;
        EXPECT_FALSE(fs::exists(root_ / "left-behind")) << "round " << round;
        pool.Release(kJob);
      }
    }
    pool.WaitScrubbed();
  }
  EXPECT_FALSE(fs::exists(root_ / "left-behind"));
}

TEST_F(UidScrubTest, DirectoriesTheUidCannotSearchAreNotWalked) {
  // Another user's private directory: the job could never reach into it.
  Dir(root_ / "private", kOther, fs::perms::owner_all);
  Write(root_ / "private" / "f", kJob);
  Dir(root_ / "group", kOther, fs::perms::owner_all | fs::perms::group_exec);
  Write(root_ / "group" / "f", kJob);
  Write(root_ / "job-file", kJob);
  ScrubReport r = ScrubUids({kJob}, {root_.string()}, /*system_v=*/false);
  EXPECT_EQ(r.removed, 2);
  EXPECT_TRUE(fs::exists(root_ / "private" / "f"));
  EXPECT_FALSE(fs::exists(root_ / "group" / "f"));
  EXPECT_FALSE(fs::exists(root_ / "job-file"));
}

TEST_F(UidScrubTest, RefusesRootAndItsOwnUid) {
  Write(root_ / "root-file", 0);
  EXPECT_EQ(ScrubUids({0}, {root_.string()}, false).removed, 0);
  EXPECT_TRUE(fs::exists(root_ / "root-file"));
}

TEST_F(UidScrubTest, RemovesTheUidsSystemVSharedMemory) {
  // A child that became the job's uid creates a segment and exits, as a job would.
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::syscall(SYS_setgroups, 0, nullptr) != 0 || ::setresgid(kJob, kJob, kJob) != 0 ||
        ::setresuid(kJob, kJob, kJob) != 0) {
      ::_exit(2);
    }
    int id = ::shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600);
    if (id < 0) ::_exit(3);
    (void)!::write(pipe_fds[1], &id, sizeof id);
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  int id = -1;
  ASSERT_EQ(::read(pipe_fds[0], &id, sizeof id), static_cast<ssize_t>(sizeof id));
  ::close(pipe_fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  struct shmid_ds ds;
  ASSERT_EQ(::shmctl(id, IPC_STAT, &ds), 0);  // it outlived its creator

  ScrubReport r = ScrubUids({kJob}, {}, /*system_v=*/true);
  EXPECT_GE(r.removed, 1);
  EXPECT_NE(::shmctl(id, IPC_STAT, &ds), 0);
}

}  // namespace
}  // namespace agent
