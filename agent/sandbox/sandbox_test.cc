// The sandbox pieces one at a time, with real processes but without mpirun: the uid switch, the
// rlimits, the uid pool, the tenant groups and what they open, the data directory's modes, cgroups
// (tests needing root skip without).
#include "agent/sandbox/sandbox.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <numeric>
#include <sstream>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "agent/sandbox/cgroup.h"
#include "agent/data/dataset_import.h"
#include "agent/sandbox/process_tree.h"
#include "agent/testing/test_util.h"

namespace agent {
namespace {

// A uid range of this test process's own, so tests running side by side do not share uids.
SandboxOptions TestSandbox() {
  SandboxOptions o;
  o.uid_base = 300000 + static_cast<uid_t>(::getpid() % 5000) * 100;
  o.uid_count = 100;
  o.max_processes = 64;
  o.max_open_files = 256;
  return o;
}

// Runs `script` with sh in a sandboxed child and returns its output once it exited.
struct RunResult {
  int status = -1;
  std::string output;
  std::string error;  // spawn failure
};
RunResult RunSandboxed(const std::string& dir, SpawnRequest req) {
  RunResult r;
  static int n = 0;
  req.output_path = dir + "/out-" + std::to_string(++n) + ".log";
  auto pid = SpawnInNewSession(req);
  if (!pid.ok()) {
    r.error = pid.status().message();
    return r;
  }
  ::waitpid(*pid, &r.status, 0);
  r.output = ReadAll(req.output_path);
  return r;
}

SpawnRequest Sh(const std::string& script) {
  SpawnRequest req;
  req.argv = {"/bin/sh", "-c", script};
  req.env = {"PATH=/usr/bin:/bin"};
  return req;
}

#define REQUIRE_ROOT() \
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (switching uids); CI runs as root"

TEST(SandboxTest, JobRunsAsItsUidWithNoGroupsNoCapabilitiesAndNoWayBack) {
  REQUIRE_ROOT();
  TempDir dir;
  JobCredentials c{TestSandbox().uid_base + 7, TestSandbox().uid_base + 7};
  SpawnRequest req = Sh(
      "id -u; id -g; id -G; grep -E '^(NoNewPrivs|CapEff|CapPrm|CapAmb):' /proc/self/status;"
      " cat /proc/1/environ >/dev/null 2>&1 && echo READ-INIT-ENV; exit 0");
  req.credentials = c;
  req.no_new_privs = true;
  RunResult r = RunSandboxed(dir.path(), req);
  ASSERT_TRUE(r.error.empty()) << r.error;
  std::string u = std::to_string(c.uid);
  EXPECT_EQ(r.output.rfind(u + "\n" + u + "\n" + u + "\n", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("NoNewPrivs:\t1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("CapEff:\t0000000000000000"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("CapPrm:\t0000000000000000"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("READ-INIT-ENV"), std::string::npos) << r.output;
}

// Tenant groups of this test process's own, apart from its job uids (whose gids are the same).
SandboxOptions TenantSandbox() {
  SandboxOptions o = TestSandbox();
  o.tenant_gid_base = 7000000 + static_cast<gid_t>(::getpid() % 5000) * 100;
  o.tenant_gid_count = 100;
  return o;
}

// The child shares the agent's memory until it execs (CloneSharingMemory): a program started
// while the caller has a handler installed, a signal ignored and one blocked, and while other
// threads allocate and write, starts with default dispositions and nothing blocked; the other
// threads' memory is untouched, and a program that does not exist is said so. Many starts in a
// row, so a child that wrote into the caller's stack or heap would show.
TEST(SandboxTest, SpawnedProgramsStartCleanWhileTheCallersThreadsRun) {
  TempDir dir;
  struct sigaction handler = {};
  handler.sa_handler = [](int) {};
  struct sigaction old_usr1, old_pipe;
  ASSERT_EQ(::sigaction(SIGUSR1, &handler, &old_usr1), 0);
  struct sigaction ignore = {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGPIPE, &ignore, &old_pipe), 0);
  sigset_t usr2, old_mask;
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  ::pthread_sigmask(SIG_BLOCK, &usr2, &old_mask);
  std::atomic<bool> stop{false};
  std::vector<std::thread> busy;
  std::atomic<uint64_t> sums[2] = {0, 0};
  for (int t = 0; t < 2; ++t) {
    busy.emplace_back([&, t] {
      while (!stop) {
        std::vector<uint64_t> v(4096);
        for (size_t i = 0; i < v.size(); ++i) v[i] = i;
        sums[t] = std::accumulate(v.begin(), v.end(), uint64_t{0});
      }
    });
  }
  for (int i = 0; i < 100; ++i) {
    SpawnRequest req;
    req.argv = {"/bin/cat", "/proc/self/status"};  // cat installs no handler of its own
    req.env = {"PATH=/usr/bin:/bin"};
    RunResult r = RunSandboxed(dir.path(), req);
    ASSERT_EQ(r.error, "") << i;
    ASSERT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << i << ": " << r.output;
    for (const char* line : {"\nSigBlk:\t0000000000000000\n", "\nSigIgn:\t0000000000000000\n",
                             "\nSigCgt:\t0000000000000000\n"}) {
      EXPECT_NE(r.output.find(line), std::string::npos) << i << ": " << r.output;
    }
  }
  SpawnRequest missing;
  missing.argv = {"no-such-program-here"};
  missing.env = {"PATH=/usr/bin:/bin"};
  RunResult r = RunSandboxed(dir.path(), missing);
  EXPECT_NE(r.error.find("cannot execute no-such-program-here"), std::string::npos) << r.error;
  stop = true;
  for (auto& t : busy) t.join();
  const uint64_t want = uint64_t{4096} * 4095 / 2;
  EXPECT_EQ(sums[0], want);
  EXPECT_EQ(sums[1], want);
  // The caller's own signal state is as it was.
  struct sigaction now;
  ::sigaction(SIGUSR1, nullptr, &now);
  EXPECT_EQ(now.sa_handler, handler.sa_handler);
  sigset_t mask;
  ::pthread_sigmask(SIG_SETMASK, nullptr, &mask);
  EXPECT_TRUE(sigismember(&mask, SIGUSR2));
  EXPECT_FALSE(sigismember(&mask, SIGUSR1));
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  ::sigaction(SIGUSR1, &old_usr1, nullptr);
  ::sigaction(SIGPIPE, &old_pipe, nullptr);
}

TEST(SandboxTest, TenantGroupsAreInRangeOrRefused) {
  SandboxOptions o = TenantSandbox();
  auto one = TenantGid(o, 1);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(*one, o.tenant_gid_base + 1);
  EXPECT_EQ(*TenantGid(o, 99), o.tenant_gid_base + 99);
  EXPECT_EQ(TenantGid(o, 0).status().code(), common::Code::kInvalidArgument);
  EXPECT_EQ(TenantGid(o, -4).status().code(), common::Code::kInvalidArgument);
  auto past = TenantGid(o, 100);
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.status().code(), common::Code::kFailedPrecondition);
  EXPECT_NE(past.status().message().find("tenant 100 has no group on this node"), std::string::npos)
      << past.status().message();
  EXPECT_NE(past.status().message().find("--tenant-gid-count"), std::string::npos);
}

TEST(SandboxTest, JobRunsWithItsTenantsGroupAndNoOther) {
  REQUIRE_ROOT();
  TempDir dir;
  const SandboxOptions o = TenantSandbox();
  const gid_t tenant = o.tenant_gid_base + 4;
  JobCredentials c{o.uid_base + 12, o.uid_base + 12, tenant};
  SpawnRequest req = Sh("id -u; id -g; id -G; grep '^Groups:' /proc/self/status; exit 0");
  req.credentials = c;
  req.no_new_privs = true;
  RunResult r = RunSandboxed(dir.path(), req);
  ASSERT_TRUE(r.error.empty()) << r.error;
  const std::string u = std::to_string(c.uid), g = std::to_string(tenant);
  EXPECT_EQ(r.output.rfind(u + "\n" + u + "\n" + u + " " + g + "\n", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("Groups:\t" + g + " \n"), std::string::npos) << r.output;
}

// A command job's virtualenv: its bin/python3 must be a file the job's uid reads and executes,
// or the job is refused with the path and the reason.
TEST(SandboxTest, AVirtualenvIsCheckedAsTheJobsUid) {
  REQUIRE_ROOT();
  TempDir dir;
  const std::string venv = dir.path() + "/venv";
  std::filesystem::create_directories(venv + "/bin");
  ::chmod(dir.path().c_str(), 0755);
  ::chmod(venv.c_str(), 0755);
  ::chmod((venv + "/bin").c_str(), 0755);
  const JobCredentials job{TestSandbox().uid_base + 21, TestSandbox().uid_base + 21};
  common::Status missing = CheckVirtualenvFor(job, venv);
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find(venv + "/bin/python3 does not exist"), std::string::npos)
      << missing.ToString();
  std::filesystem::create_symlink("/bin/sh", venv + "/bin/python3");
  EXPECT_TRUE(CheckVirtualenvFor(job, venv).ok());
  EXPECT_TRUE(CheckVirtualenvFor(std::nullopt, venv).ok());
  // The directory closed to others: the agent (root) still gets in, the job's uid does not.
  ::chmod(venv.c_str(), 0700);
  common::Status closed = CheckVirtualenvFor(job, venv);
  EXPECT_FALSE(closed.ok());
  EXPECT_NE(closed.message().find("not a file the job's uid (" + std::to_string(job.uid) +
                                  ") can read and execute"),
            std::string::npos)
      << closed.ToString();
  EXPECT_TRUE(CheckVirtualenvFor(std::nullopt, venv).ok());
  // A directory where python3 should be is no interpreter.
  ::chmod(venv.c_str(), 0755);
  std::filesystem::remove(venv + "/bin/python3");
  std::filesystem::create_directories(venv + "/bin/python3");
  EXPECT_FALSE(CheckVirtualenvFor(job, venv).ok());
}

// The dataset root as agents lay it out (agent/data/dataset_import.h): tenant A's jobs read A's
// versions; tenant B's jobs get EACCES on the file and on listing A's directory; nobody writes
// into a tenant's directory.
TEST(SandboxTest, OnlyTheTenantsJobsReadItsDatasets) {
  REQUIRE_ROOT();
  TempDir dir;
  const SandboxOptions o = TenantSandbox();
  const std::string root = dir.path() + "/datasets";
  const std::string tenant_a = root + "/tenant-1";
  const std::string file = tenant_a + "/dataset-5/dataset.json";
  ASSERT_TRUE(PrepareTenantDir(tenant_a, *TenantGid(o, 1)).ok());
  ASSERT_TRUE(common::MakeDirs(tenant_a + "/dataset-5").ok());
  ASSERT_TRUE(common::WriteFileAtomic(file, "secret-of-tenant-a\n", 0444).ok());
  const JobCredentials a{o.uid_base + 13, o.uid_base + 13, *TenantGid(o, 1)};
  const JobCredentials b{o.uid_base + 14, o.uid_base + 14, *TenantGid(o, 2)};
  const std::string probe = "cat " + file + "; ls " + tenant_a + "; touch " + tenant_a +
                            "/planted && echo WROTE; touch " + tenant_a +
                            "/dataset-5/x && echo "
                            "WROTE; exit 0";
  SpawnRequest req = Sh(probe);
  req.credentials = a;
  RunResult ra = RunSandboxed(dir.path(), req);
  ASSERT_TRUE(ra.error.empty()) << ra.error;
  EXPECT_NE(ra.output.find("secret-of-tenant-a"), std::string::npos) << ra.output;
  EXPECT_NE(ra.output.find("dataset-5"), std::string::npos) << ra.output;  // listed
  EXPECT_EQ(ra.output.find("WROTE"), std::string::npos) << ra.output;
  EXPECT_TRUE(CanReadAs(a, file, false));

  req.credentials = b;
  RunResult rb = RunSandboxed(dir.path(), req);
  ASSERT_TRUE(rb.error.empty()) << rb.error;
  EXPECT_EQ(rb.output.find("secret-of-tenant-a"), std::string::npos) << rb.output;
  EXPECT_NE(rb.output.find("cat: " + file + ": Permission denied"), std::string::npos) << rb.output;
  EXPECT_NE(rb.output.find("cannot open directory '" + tenant_a + "': Permission denied"),
            std::string::npos)
      << rb.output;
  EXPECT_EQ(rb.output.find("WROTE"), std::string::npos) << rb.output;
  EXPECT_FALSE(CanReadAs(b, file, false));
  EXPECT_FALSE(CanReadAs(b, tenant_a, true));
  // Without a group at all, as before tenants had groups: no way in either.
  EXPECT_FALSE(CanReadAs({o.uid_base + 15, o.uid_base + 15}, file, false));
  EXPECT_FALSE(std::filesystem::exists(tenant_a + "/planted"));
}

TEST(SandboxTest, TheJobDirectoryIsEnteredWithTheJobsRights) {
  REQUIRE_ROOT();
  TempDir dir;
  std::string root_only = dir.path() + "/root-only";
  ASSERT_EQ(::mkdir(root_only.c_str(), 0700), 0);
  SpawnRequest req = Sh("true");
  req.credentials = JobCredentials{TestSandbox().uid_base + 8, TestSandbox().uid_base + 8};
  req.cwd = root_only;
  RunResult r = RunSandboxed(dir.path(), req);
  EXPECT_NE(r.error.find("cannot enter the job directory"), std::string::npos) << r.error;
}

TEST(SandboxTest, RlimitsAreAppliedAndCannotBeRaised) {
  TempDir dir;
  SandboxOptions o = TestSandbox();
  o.switch_uid = ::geteuid() == 0;
  SpawnRequest req = Sh("cat /proc/self/limits; ulimit -n 1000 && echo RAISED-NOFILE; exit 0");
  req.limits = JobRlimits(o);
  if (o.switch_uid) req.credentials = JobCredentials{o.uid_base + 9, o.uid_base + 9};
  RunResult r = RunSandboxed(dir.path(), req);
  ASSERT_TRUE(r.error.empty()) << r.error;
  auto has = [&](const std::string& name, const std::string& value) {
    size_t at = r.output.find(name);
    if (at == std::string::npos) return false;
    std::string line = r.output.substr(at, r.output.find('\n', at) - at);
    // "Max open files            256                  256                  files"
    std::istringstream fields(line.substr(name.size()));
    std::string soft, hard;
    fields >> soft >> hard;
    return soft == value && hard == value;
  };
  EXPECT_TRUE(has("Max core file size", "0")) << r.output;
  EXPECT_TRUE(has("Max open files", "256")) << r.output;
  if (o.switch_uid) {
    EXPECT_TRUE(has("Max processes", "64")) << r.output;
  }
  EXPECT_EQ(r.output.find("RAISED-NOFILE"), std::string::npos) << r.output;
}

TEST(SandboxTest, ProcessLimitHoldsPerJobUid) {
  REQUIRE_ROOT();
  TempDir dir;
  SandboxOptions o = TestSandbox();
  o.max_processes = 20;
  SpawnRequest req = Sh("i=0; while [ $i -lt 40 ]; do sleep 5 & i=$((i+1)); done;"
                        " echo started; kill $(jobs -p) 2>/dev/null; exit 0");
  req.limits = JobRlimits(o);
  req.credentials = JobCredentials{o.uid_base + 10, o.uid_base + 10};
  RunResult r = RunSandboxed(dir.path(), req);
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_NE(r.output.find("fork"), std::string::npos) << r.output;  // "Cannot fork" from sh
  KillAllOfUid(o.uid_base + 10);
}

TEST(SandboxTest, UidPoolHandsOutDistinctFreeUids) {
  SandboxOptions o;
  o.uid_base = ::geteuid();  // a uid with live processes (this one) is never handed out
  o.uid_count = 3;
  UidPool pool(o);
  auto a = pool.Acquire(3);  // 3 mod 3 = 0: the busy base, so the next one
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, o.uid_base + 1);
  auto b = pool.Acquire(4);  // 4 mod 3 = 1: held, so the next one
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, o.uid_base + 2);
  EXPECT_FALSE(pool.Acquire(5).ok());  // all held or busy
  pool.Release(*a);
  auto c = pool.Acquire(7);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, o.uid_base + 1);
  EXPECT_TRUE(pool.InRange(o.uid_base + 2));
  EXPECT_FALSE(pool.InRange(o.uid_base + 3));
}

TEST(SandboxTest, DataDirectoryModesAndReachability) {
  TempDir dir;
  std::string data = dir.path() + "/data";
  ASSERT_TRUE(PrepareDataDir(data, /*switch_uid=*/true).ok());
  auto mode = [](const std::string& p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0u;
  };
  EXPECT_EQ(mode(data), 0711u);
  EXPECT_EQ(mode(data + "/jobs"), 0711u);
  EXPECT_EQ(mode(data + "/checkpoints"), 0711u);
  EXPECT_EQ(mode(data + "/logs"), 0700u);
  // A data directory job uids cannot reach is refused, naming the culprit.
  std::string closed = dir.path() + "/closed";
  ASSERT_EQ(::mkdir(closed.c_str(), 0700), 0);
  auto st = PrepareDataDir(closed + "/data", true);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(closed + " is not searchable by others"), std::string::npos)
      << st.message();
  EXPECT_TRUE(PrepareDataDir(closed + "/data", /*switch_uid=*/false).ok());
  EXPECT_EQ(mode(closed + "/data"), 0700u);
}

TEST(SandboxTest, AdoptTreeTakesOnlyWhatJobsWrote) {
  REQUIRE_ROOT();
  TempDir dir;
  SandboxOptions o = TestSandbox();
  UidPool pool(o);
  uid_t old_uid = o.uid_base + 1, new_uid = o.uid_base + 2;
  std::string top = dir.path() + "/ckpt";
  ASSERT_TRUE(common::MakeDirs(top + "/sub").ok());
  AppendTo(top + "/sub/a.ckpt", "a");
  AppendTo(top + "/root.txt", "secret");
  AppendTo(dir.path() + "/outside", "x");
  ASSERT_EQ(::link((dir.path() + "/outside").c_str(), (top + "/linked").c_str()), 0);
  ASSERT_EQ(::symlink("/etc/shadow", (top + "/sym").c_str()), 0);
  for (const char* p : {"", "/sub", "/sub/a.ckpt"}) {
    ASSERT_EQ(::lchown((top + p).c_str(), old_uid, old_uid), 0);
  }
  ASSERT_EQ(::chown((top + "/linked").c_str(), old_uid, old_uid), 0);
  ASSERT_TRUE(AdoptTree(top, {new_uid, new_uid}, pool).ok());
  auto owner = [](const std::string& p) {
    struct stat st;
    return ::lstat(p.c_str(), &st) == 0 ? st.st_uid : static_cast<uid_t>(-1);
  };
  EXPECT_EQ(owner(top), new_uid);
  EXPECT_EQ(owner(top + "/sub"), new_uid);
  EXPECT_EQ(owner(top + "/sub/a.ckpt"), new_uid);
  EXPECT_EQ(owner(top + "/root.txt"), 0u);          // not a job's
  EXPECT_EQ(owner(top + "/linked"), old_uid);       // two links: could be anyone's file
  EXPECT_EQ(owner("/etc/shadow"), 0u);              // links are not followed
  LockDir(top, &pool);
  EXPECT_EQ(owner(top), 0u);
  EXPECT_EQ(owner(top + "/sub"), 0u);
  EXPECT_EQ(owner(top + "/sub/a.ckpt"), 0u);
  EXPECT_EQ(owner(top + "/linked"), old_uid);
  EXPECT_FALSE(CanReadAs({new_uid, new_uid}, top, true));
}

TEST(SandboxTest, KillAllOfUidCatchesProcessesThatLeftTheTree) {
  REQUIRE_ROOT();
  TempDir dir;
  uid_t uid = TestSandbox().uid_base + 11;
  SpawnRequest req = Sh("(setsid sleep 1000 &); sleep 1000");
  req.credentials = JobCredentials{uid, uid};
  req.output_path = dir.path() + "/out.log";
  auto pid = SpawnInNewSession(req);
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  for (int i = 0; i < 200 && ProcessUids().count(uid) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  KillAllOfUid(uid);
  int status = 0;
  ::waitpid(*pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status));
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    gone = ProcessUids().count(uid) == 0;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(gone) << "a process of uid " << uid << " survived";
}

TEST(SandboxTest, IsolationIsDescribed) {
  auto iso = DescribeIsolation(true, CgroupVersion::kV1);
  EXPECT_TRUE(iso.unprivileged_uid);
  EXPECT_EQ(iso.cgroup, "v1");
  EXPECT_TRUE(iso.rlimits);
  EXPECT_EQ(DescribeIsolation(false, CgroupVersion::kNone).cgroup, "none");
}

}  // namespace
}  // namespace agent
