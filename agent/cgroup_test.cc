// Reading the node's cgroup layout, and a job cgroup's life on this machine (skipped where the
// agent could not use cgroups: not root, or nothing mounted).
#include "agent/cgroup.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "agent/sandbox.h"
#include "agent/spawn.h"
#include "agent/test_util.h"
#include "common/crypto.h"

namespace agent {
namespace {

// A hybrid node (v1 controllers, an empty v2 hierarchy), as on our own machines.
const char kHybridMountinfo[] =
    "25 19 0:22 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755\n"
    "26 25 0:23 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw\n"
    "28 25 0:25 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:9 - cgroup cgroup rw,cpu,cpuacct\n"
    "29 25 0:26 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory\n"
    "30 25 0:27 / /sys/fs/cgroup/pids rw,nosuid - cgroup cgroup rw,pids\n"
    "31 25 0:28 / /sys/fs/cgroup/my\\040dir rw - cgroup cgroup rw,name=systemd\n";
const char kHybridSelf[] =
    "9:name=systemd:/\n8:pids:/user.slice\n4:memory:/process_api/abc\n1:cpu,cpuacct:/\n0::/\n";

TEST(CgroupTest, ParsesMountsAndOwnCgroups) {
  auto mounts = ParseCgroupMounts(kHybridMountinfo);
  ASSERT_EQ(mounts.size(), 5u);
  EXPECT_TRUE(mounts[0].v2);
  EXPECT_EQ(mounts[0].mount_point, "/sys/fs/cgroup/unified");
  EXPECT_EQ(mounts[1].controllers, (std::set<std::string>{"rw", "cpu", "cpuacct"}));
  EXPECT_EQ(mounts[4].mount_point, "/sys/fs/cgroup/my dir");
  auto self = ParseProcCgroup(kHybridSelf);
  EXPECT_EQ(self.at(""), "/");
  EXPECT_EQ(self.at("cpuacct"), "/");
  EXPECT_EQ(self.at("memory"), "/process_api/abc");
  auto own = OwnCgroupDirs(mounts, self);
  EXPECT_EQ(own, (std::map<std::string, std::string>{
                     {"", "/sys/fs/cgroup/unified"},
                     {"cpu", "/sys/fs/cgroup/cpu,cpuacct"},
                     {"memory", "/sys/fs/cgroup/memory/process_api/abc"},
                     {"pids", "/sys/fs/cgroup/pids/user.slice"}}));
}

TEST(CgroupTest, PureV2WithANamespacedRoot) {
  auto mounts = ParseCgroupMounts(
      "30 25 0:26 /kubepods/pod1 /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n");
  auto own = OwnCgroupDirs(mounts, ParseProcCgroup("0::/kubepods/pod1/agent\n"));
  EXPECT_EQ(own, (std::map<std::string, std::string>{{"", "/sys/fs/cgroup/agent"}}));
  // A cgroup outside what is mounted cannot be used.
  EXPECT_TRUE(OwnCgroupDirs(mounts, ParseProcCgroup("0::/elsewhere\n")).empty());
}

TEST(CgroupTest, JobCgroupHoldsTheJobAndIsRemoved) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to create cgroups; CI runs as root";
  TempDir dir;
  CgroupSetup setup = SetUpCgroups(common::Sha256Hex(dir.path()).substr(0, 12));
  if (setup.version == CgroupVersion::kNone) GTEST_SKIP() << "no usable cgroups: " << setup.note;
  auto cg = JobCgroup::Create(setup, 77, {64 << 20, 1, 32});
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  JobCgroup& job = **cg;
  for (const auto& d : job.dirs()) {
    EXPECT_EQ(::access(d.c_str(), F_OK), 0) << d;
    EXPECT_NE(d.find("/embody-"), std::string::npos) << d;
  }
  std::string mem_dir = job.dirs().front();
  for (const auto& d : job.dirs()) {
    if (d.find("/memory/") != std::string::npos) mem_dir = d;
  }
  std::string limit = ReadAll(mem_dir + (setup.version == CgroupVersion::kV2
                                             ? "/memory.max"
                                             : "/memory.limit_in_bytes"));
  EXPECT_EQ(limit, std::to_string(64 << 20) + "\n");

  SpawnRequest req;
  req.argv = {"/bin/sh", "-c", "(setsid sleep 1000 &); exec sleep 1000"};
  req.env = {"PATH=/usr/bin:/bin"};
  req.output_path = dir.path() + "/out.log";
  req.cgroup_procs = job.ProcsFiles();
  auto pid = SpawnInNewSession(req);
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  std::vector<pid_t> inside;
  for (int i = 0; i < 200 && inside.size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    inside = job.Pids();
  }
  EXPECT_EQ(inside.size(), 2u);  // the child and the sleep that left its session
  EXPECT_NE(ReadAll("/proc/" + std::to_string(*pid) + "/cgroup").find("/job-77"),
            std::string::npos);
  ASSERT_TRUE(job.Remove().ok());  // kills both, then removes the directories
  int status = 0;
  ::waitpid(*pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status));
  for (const auto& d : job.dirs()) ADD_FAILURE() << "left " << d;
  for (const auto& d : (*cg)->ProcsFiles()) ADD_FAILURE() << "left " << d;
  TearDownCgroups(setup);
  for (const auto& [c, parent] : setup.parents) EXPECT_NE(::access(parent.c_str(), F_OK), 0);
}

}  // namespace
}  // namespace agent
