// Reading the node's cgroup layout, the GPU device program's encoding, and a job cgroup's life on
// this machine (skipped where the agent could not use cgroups: not root, or nothing mounted).
#include "agent/sandbox/cgroup.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <thread>

#include <gtest/gtest.h>

#include "agent/sandbox/cgroup_device_filter.h"
#include "agent/sandbox/sandbox.h"
#include "agent/sandbox/spawn.h"
#include "agent/testing/test_util.h"
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

// Starts, in `job`'s cgroup, a process that forks a daemon out of its session and then sleeps,
// and waits until the cgroup holds exactly those two (the subshell between them comes and goes).
common::Result<pid_t> SpawnDaemonPair(const JobCgroup& job, const std::string& dir,
                                      std::vector<pid_t>* inside) {
  SpawnRequest req;
  req.argv = {"/bin/sh", "-c", "(setsid sleep 1000 &); exec sleep 1000"};
  req.env = {"PATH=/usr/bin:/bin"};
  req.output_path = dir + "/out.log";
  req.cgroup_procs = job.ProcsFiles();
  auto pid = SpawnInNewSession(req);
  if (!pid.ok()) return pid.status();
  for (int i = 0; i < 500 && inside->size() != 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    *inside = job.Pids();
  }
  return *pid;
}

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
  if (setup.version == CgroupVersion::kV2) {
    // One CPU slot is one CPU's time per period; pids bounds the job's process count.
    EXPECT_EQ(ReadAll(mem_dir + "/cpu.max"), "100000 100000\n");
    EXPECT_EQ(ReadAll(mem_dir + "/pids.max"), "32\n");
    if (::access((mem_dir + "/memory.swap.max").c_str(), F_OK) == 0) {
      EXPECT_EQ(ReadAll(mem_dir + "/memory.swap.max"), "0\n");
    }
  } else {
    for (const auto& d : job.dirs()) {
      if (d.find("/cpu") != std::string::npos && d.find("/cpuset") == std::string::npos) {
        EXPECT_EQ(ReadAll(d + "/cpu.cfs_quota_us"), "100000\n") << d;
      }
      if (d.find("/pids/") != std::string::npos) {
        EXPECT_EQ(ReadAll(d + "/pids.max"), "32\n");
      }
    }
  }

  std::vector<pid_t> inside;
  auto pid = SpawnDaemonPair(job, dir.path(), &inside);
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
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

// Runs `program` on one device access as the kernel would, for the instructions GpuDenyProgram
// uses (any other, a jump out of the program or a read outside the context fails the test):
// the reference the builder's encoding is checked against where no kernel will load it.
int RunDeviceProgram(const std::vector<bpf_insn>& program, uint32_t type, uint32_t access,
                     uint32_t major, uint32_t minor) {
  const bpf_cgroup_dev_ctx ctx{(access << 16) | type, major, minor};
  uint64_t r[11] = {};
  size_t pc = 0;
  while (pc < program.size()) {
    const bpf_insn& in = program[pc++];
    if (in.dst_reg > 10) {
      ADD_FAILURE() << "register r" << int(in.dst_reg) << " at " << pc - 1;
      return -1;
    }
    uint64_t& dst = r[in.dst_reg];
    const uint64_t imm = static_cast<uint64_t>(static_cast<int64_t>(in.imm));  // sign-extended
    bool jump = false;
    switch (in.code) {
      case BPF_LDX | BPF_MEM | BPF_W:
        if (in.src_reg != BPF_REG_1 || in.off < 0 || in.off % 4 != 0 ||
            in.off + 4 > static_cast<int>(sizeof(ctx))) {
          ADD_FAILURE() << "load outside the context at " << pc - 1;
          return -1;
        }
        uint32_t word;
        std::memcpy(&word, reinterpret_cast<const char*>(&ctx) + in.off, 4);
        dst = word;
        break;
      case BPF_ALU | BPF_AND | BPF_K:
        dst = static_cast<uint32_t>(dst & imm);
        break;
      case BPF_ALU64 | BPF_MOV | BPF_K:
        dst = imm;
        break;
      case BPF_JMP | BPF_JEQ | BPF_K:
        jump = dst == imm;
        break;
      case BPF_JMP | BPF_JNE | BPF_K:
        jump = dst != imm;
        break;
      case BPF_JMP | BPF_EXIT:
        return static_cast<int>(r[0]);
      default:
        ADD_FAILURE() << "unexpected opcode " << int(in.code) << " at " << pc - 1;
        return -1;
    }
    if (jump) {
      if (in.off < 0 || pc + in.off >= program.size()) {
        ADD_FAILURE() << "jump out of the program at " << pc - 1;
        return -1;
      }
      pc += in.off;
    }
  }
  ADD_FAILURE() << "ran off the end of the program";
  return -1;
}

TEST(CgroupTest, GpuDenyProgramDeniesOnlyTheListedGpus) {
  // The shape: a two-instruction allow-all for none, else 10 plus one compare per minor.
  for (auto [minors, want] :
       std::vector<std::pair<std::vector<int>, size_t>>{{{}, 2}, {{3}, 11}, {{0, 3, 7}, 13}}) {
    auto p = GpuDenyProgram(minors);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_EQ(p->size(), want) << minors.size() << " minors";
  }

  auto p = GpuDenyProgram({3, 7});
  ASSERT_TRUE(p.ok());
  const uint32_t kAll = BPF_DEVCG_ACC_MKNOD | BPF_DEVCG_ACC_READ | BPF_DEVCG_ACC_WRITE;
  for (uint32_t access : {uint32_t{BPF_DEVCG_ACC_READ}, uint32_t{BPF_DEVCG_ACC_WRITE},
                          uint32_t{BPF_DEVCG_ACC_MKNOD}, kAll}) {
    EXPECT_EQ(RunDeviceProgram(*p, BPF_DEVCG_DEV_CHAR, access, 195, 3), 0) << access;
    EXPECT_EQ(RunDeviceProgram(*p, BPF_DEVCG_DEV_CHAR, access, 195, 7), 0) << access;
    EXPECT_EQ(RunDeviceProgram(*p, BPF_DEVCG_DEV_CHAR, access, 195, 4), 1) << access;
    EXPECT_EQ(RunDeviceProgram(*p, BPF_DEVCG_DEV_CHAR, access, 195, 255), 1) << "nvidiactl";
    EXPECT_EQ(RunDeviceProgram(*p, BPF_DEVCG_DEV_BLOCK, access, 195, 3), 1) << "a block device";
    EXPECT_EQ(RunDeviceProgram(*p, BPF_DEVCG_DEV_CHAR, access, 1, 3), 1) << "/dev/mem";
    EXPECT_EQ(RunDeviceProgram(*p, BPF_DEVCG_DEV_CHAR, access, 1, 5), 1) << "/dev/zero";
  }
  auto none = GpuDenyProgram({});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(RunDeviceProgram(*none, BPF_DEVCG_DEV_CHAR, kAll, 195, 0), 1);

  // The bound: kMaxDeniedMinors is accepted (and every one of them denied), one more refused.
  std::vector<int> many(kMaxDeniedMinors);
  for (size_t i = 0; i < many.size(); ++i) many[i] = static_cast<int>(i);
  auto most = GpuDenyProgram(many);
  ASSERT_TRUE(most.ok()) << most.status().ToString();
  EXPECT_EQ(most->size(), 10 + kMaxDeniedMinors);
  EXPECT_EQ(RunDeviceProgram(*most, BPF_DEVCG_DEV_CHAR, kAll, 195, 0), 0);
  EXPECT_EQ(RunDeviceProgram(*most, BPF_DEVCG_DEV_CHAR, kAll, 195, kMaxDeniedMinors - 1), 0);
  EXPECT_EQ(RunDeviceProgram(*most, BPF_DEVCG_DEV_CHAR, kAll, 195, kMaxDeniedMinors), 1);
  many.push_back(static_cast<int>(kMaxDeniedMinors));
  auto too_many = GpuDenyProgram(many);
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(too_many.status().code(), common::Code::kInvalidArgument);
  EXPECT_NE(too_many.status().message().find("at most 1024"), std::string::npos)
      << too_many.status().message();
  EXPECT_FALSE(GpuDenyProgram({-1}).ok());
  EXPECT_FALSE(GpuDenyProgram({kMaxDeviceMinor + 1}).ok());
  EXPECT_TRUE(GpuDenyProgram({kMaxDeviceMinor}).ok());
}

// The errno of open(path, O_RDWR) by a child that first joins `job`'s cgroup (0: it opened;
// kCouldNotJoin: it never got inside).
constexpr int kCouldNotJoin = 200;
int OpenErrnoInside(const JobCgroup& job, const std::string& path) {
  const std::vector<std::string> procs_files = job.ProcsFiles();
  pid_t child = ::fork();
  if (child == 0) {
    for (const auto& procs : procs_files) {
      int fd = ::open(procs.c_str(), O_WRONLY);
      if (fd < 0 || ::write(fd, "0", 1) != 1) ::_exit(kCouldNotJoin);
      ::close(fd);
    }
    int fd = ::open(path.c_str(), O_RDWR);
    ::_exit(fd < 0 ? errno : 0);
  }
  int status = 0;
  if (child < 0 || ::waitpid(child, &status, 0) != child || !WIFEXITED(status)) {
    return kCouldNotJoin;
  }
  return WEXITSTATUS(status);
}

int OpenErrno(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR);
  if (fd < 0) return errno;
  ::close(fd);
  return 0;
}

// Makes a stand-in GPU /dev/nvidiaN (character device 195:N) in `dir` and returns its path.
std::string MakeStandInGpu(const std::string& dir, int minor) {
  std::string path = dir + "/nvidia" + std::to_string(minor);
  EXPECT_EQ(::mknod(path.c_str(), S_IFCHR | 0666, makedev(195, minor)), 0) << std::strerror(errno);
  return path;
}

// A job denied GPU 3 cannot open it from its cgroup, while GPU 4 (its own) is not refused. The
// stand-in nodes have no driver behind them: an allowed open fails ENXIO or ENODEV, a denied one
// EPERM; from outside the cgroup neither is EPERM, so the refusal is the job cgroup's.
void ExpectOnlyTheJobsGpuOpens(const CgroupSetup& setup, int64_t job_id, const std::string& dir) {
  const std::string denied = MakeStandInGpu(dir, 3), allowed = MakeStandInGpu(dir, 4);
  ASSERT_NE(OpenErrno(denied), EPERM) << "this machine refuses 195:3 to the test itself";
  CgroupLimits limits;
  limits.denied_gpus = {3};
  auto cg = JobCgroup::Create(setup, job_id, limits);
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  int denied_err = OpenErrnoInside(**cg, denied);
  int allowed_err = OpenErrnoInside(**cg, allowed);
  EXPECT_NE(denied_err, kCouldNotJoin) << "could not join the job cgroup";
  EXPECT_EQ(denied_err, EPERM) << "the denied GPU: " << std::strerror(denied_err);
  EXPECT_NE(allowed_err, EPERM) << "the job's own GPU was denied";
  EXPECT_NE(allowed_err, kCouldNotJoin) << "could not join the job cgroup";
  EXPECT_TRUE((*cg)->Remove().ok());
}

// GPUs that are not the job's cannot be opened from its cgroup, whatever its
// CUDA_VISIBLE_DEVICES says: through the v1 devices controller, or on v2 through the device
// program JobCgroup::Create attaches (the v2 half runs in agent_cgroup_v2_vm_test).
TEST(CgroupTest, AJobCannotOpenAnotherJobsGpu) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to create cgroups; CI runs as root";
  TempDir dir;
  CgroupSetup setup = SetUpCgroups(common::Sha256Hex(dir.path() + "dev").substr(0, 12));
  const bool v1_devices = setup.version == CgroupVersion::kV1 && setup.parents.count("devices") > 0;
  if (!v1_devices && setup.version != CgroupVersion::kV2) {
    std::string why = std::string("cgroups: ") + CgroupVersionName(setup.version) +
                      (setup.note.empty() ? "" : " (" + setup.note + ")");
    TearDownCgroups(setup);
    GTEST_SKIP() << "no device control here, neither a v1 devices controller nor cgroup v2; "
                 << why;
  }
  if (v1_devices) {
    EXPECT_EQ(GpuDenyRules({3, 7}), (std::vector<std::string>{"c 195:3 rwm", "c 195:7 rwm"}));
  }
  ExpectOnlyTheJobsGpuOpens(setup, 78, dir.path());
  TearDownCgroups(setup);
}

// The device program on this kernel's own cgroup2 mount, whatever the agent uses for limits (on
// a hybrid node the v1 devices controller lets everything through, so only the program can
// refuse): it fences the job's GPUs, a program attached above (as systemd's is) still runs
// beside it, and a deny list it cannot build fails Create and leaves no cgroup.
TEST(CgroupTest, V2DeviceProgramFencesGpusBesideTheOneAbove) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to create cgroups; CI runs as root";
  auto mounts = ParseCgroupMounts(ReadAll("/proc/self/mountinfo"));
  auto own = OwnCgroupDirs(mounts, ParseProcCgroup(ReadAll("/proc/self/cgroup")));
  if (!own.count("")) GTEST_SKIP() << "no cgroup2 hierarchy mounted";
  TempDir dir;
  std::string parent = own[""] + "/embody-v2dev-" + common::Sha256Hex(dir.path()).substr(0, 8);
  ASSERT_EQ(::mkdir(parent.c_str(), 0755), 0) << parent << ": " << std::strerror(errno);
  CgroupSetup setup;
  setup.version = CgroupVersion::kV2;
  setup.parents = {{"", parent}};
  auto above = GpuDenyProgram({5});
  ASSERT_TRUE(above.ok());
  common::Status st = AttachDeviceProgram(parent, *above);
  if (!st.ok()) {
    TearDownCgroups(setup);
    FAIL() << st.ToString();
  }
  const std::string fenced_above = MakeStandInGpu(dir.path(), 5);
  // A program the verifier refuses (it exits with r0 never set) comes back with its log.
  bpf_insn bare_exit{};
  bare_exit.code = BPF_JMP | BPF_EXIT;
  st = AttachDeviceProgram(parent, {bare_exit});
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("verifier: "), std::string::npos) << st.message();

  ExpectOnlyTheJobsGpuOpens(setup, 79, dir.path());
  CgroupLimits limits;
  limits.denied_gpus = {3};
  auto cg = JobCgroup::Create(setup, 79, limits);
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  EXPECT_EQ(OpenErrnoInside(**cg, fenced_above), EPERM) << "the program above did not run";
  EXPECT_TRUE((*cg)->Remove().ok());

  limits.denied_gpus = {3, -1};
  auto refused = JobCgroup::Create(setup, 80, limits);
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(::access((parent + "/job-80").c_str(), F_OK), 0) << "a job cgroup without its fence";
  TearDownCgroups(setup);
  EXPECT_NE(::access(parent.c_str(), F_OK), 0);
}

// The v2 half of a job cgroup (membership, cgroup.kill, removal) on this kernel's own cgroup2
// mount, whatever controllers it offers: on a hybrid node, where the agent itself uses v1 for
// limits, this is the only way the v2 path meets a real kernel. Limits are left at zero, since a
// hybrid v2 hierarchy has no memory or cpu controller to take them.
TEST(CgroupTest, V2JobCgroupKillsEveryProcessThroughCgroupKill) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to create cgroups; CI runs as root";
  auto mounts = ParseCgroupMounts(ReadAll("/proc/self/mountinfo"));
  auto own = OwnCgroupDirs(mounts, ParseProcCgroup(ReadAll("/proc/self/cgroup")));
  if (!own.count("")) GTEST_SKIP() << "no cgroup2 hierarchy mounted";
  TempDir dir;
  std::string parent = own[""] + "/embody-v2test-" + common::Sha256Hex(dir.path()).substr(0, 8);
  if (::mkdir(parent.c_str(), 0755) != 0) {
    GTEST_SKIP() << "cannot create a cgroup under " << own[""] << ": " << std::strerror(errno);
  }
  if (::access((parent + "/cgroup.kill").c_str(), F_OK) != 0) {
    ::rmdir(parent.c_str());
    GTEST_SKIP() << "this kernel has no cgroup.kill (before 5.14)";
  }
  CgroupSetup setup;
  setup.version = CgroupVersion::kV2;
  setup.parents = {{"", parent}};
  auto cg = JobCgroup::Create(setup, 78, {0, 0, 0});
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  JobCgroup& job = **cg;
  ASSERT_EQ(job.dirs().size(), 1u);
  EXPECT_EQ(job.dirs().front(), parent + "/job-78");

  // A grandchild that leaves the session and the parent that forked it: only the cgroup holds both.
  std::vector<pid_t> inside;
  auto pid = SpawnDaemonPair(job, dir.path(), &inside);
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  ASSERT_EQ(inside.size(), 2u);
  EXPECT_NE(ReadAll("/proc/" + std::to_string(*pid) + "/cgroup").find("0::"), std::string::npos);
  EXPECT_FALSE(job.MemoryLimitHit());

  job.KillAll();  // one write to cgroup.kill, no pid list to race with
  int status = 0;
  pid_t reaped = 0;
  for (int i = 0; i < 300 && reaped == 0; ++i) {
    reaped = ::waitpid(*pid, &status, WNOHANG);
    if (reaped == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (reaped != *pid) {
    for (pid_t p : job.Pids()) ::kill(p, SIGKILL);  // leave nothing behind before failing
    ::waitpid(*pid, &status, 0);
    (void)job.Remove();
    TearDownCgroups(setup);
    FAIL() << "cgroup.kill did not end the job's first process";
  }
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  for (int i = 0; i < 200 && !job.Pids().empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(job.Pids().empty());
  for (pid_t p : inside) {
    if (p == *pid) continue;
    // Gone, or a zombie its new parent has not reaped yet ("Z" after the name in stat).
    std::string stat = ReadAll("/proc/" + std::to_string(p) + "/stat");
    size_t name_end = stat.rfind(')');
    bool dead = stat.empty() || (name_end != std::string::npos && name_end + 2 < stat.size() &&
                                 stat[name_end + 2] == 'Z');
    EXPECT_TRUE(dead) << "process " << p << " outlived cgroup.kill: " << stat;
  }
  ASSERT_TRUE(job.Remove().ok());
  EXPECT_NE(::access((parent + "/job-78").c_str(), F_OK), 0);
  TearDownCgroups(setup);
  EXPECT_NE(::access(parent.c_str(), F_OK), 0);
}

// What the node reports: on a v2 hierarchy without memory, cpu and pids to delegate the agent falls
// back to v1 and says why; with them, it takes v2.
TEST(CgroupTest, SetUpSaysWhyItDidNotTakeV2) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to create cgroups; CI runs as root";
  auto mounts = ParseCgroupMounts(ReadAll("/proc/self/mountinfo"));
  auto own = OwnCgroupDirs(mounts, ParseProcCgroup(ReadAll("/proc/self/cgroup")));
  if (!own.count("")) GTEST_SKIP() << "no cgroup2 hierarchy mounted";
  std::string offered = ReadAll(own[""] + "/cgroup.controllers");
  bool full = offered.find("memory") != std::string::npos &&
              offered.find("cpu") != std::string::npos && offered.find("pids") != std::string::npos;
  TempDir dir;
  CgroupSetup setup = SetUpCgroups(common::Sha256Hex(dir.path()).substr(0, 12));
  if (full) {
    EXPECT_EQ(setup.version, CgroupVersion::kV2) << setup.note;
  } else {
    EXPECT_NE(setup.version, CgroupVersion::kV2);
    EXPECT_NE(setup.note.find("cgroup v2 does not offer the"), std::string::npos) << setup.note;
  }
  TearDownCgroups(setup);
}

}  // namespace
}  // namespace agent
