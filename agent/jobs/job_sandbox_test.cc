// Jobs in their sandbox, launched by the JobRunner through the real mpirun: each runs as a uid of
// its own with its tenant's group, sees none of the agent's environment, cannot read another
// job's directory or /proc/<pid>/environ, nor the agent's files, nor another tenant's datasets;
// its argv never becomes mpirun options; its memory limit holds; its cgroup comes and goes with
// it. Needs root (CI runs as root): skipped otherwise.
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "agent/jobs/job_runner.h"
#include "agent/testing/test_util.h"
#include "common/crypto.h"

namespace agent {
namespace {

// How long a job may take to end before a test gives up: far above what it takes on a host, so
// that the same tests hold under emulation (tests/vm/run_in_vm.sh) on a busy machine.
constexpr std::chrono::seconds kFinishWithin{120};

using std::chrono::milliseconds;
using std::chrono::seconds;

// Stands for the agent's server token: in the runner's environment and in the data directory.
const char kAgentMarker[] = "agent-secret-7c41d2e9";

class JobSandboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to give jobs uids of their own";
    ASSERT_TRUE(PrepareDataDir(dir_.path(), true).ok());
    ::setenv("EMBODY_AGENT_TOKEN_FOR_TEST", kAgentMarker, 1);
    ASSERT_TRUE(common::WriteFileAtomic(dir_.path() + "/node.token", kAgentMarker, 0600).ok());
    cgroups_ = SetUpCgroups(common::Sha256Hex(dir_.path()).substr(0, 12));
  }
  void TearDown() override {
    runner_.reset();
    pool_.reset();
    TearDownCgroups(cgroups_);
    ::unsetenv("EMBODY_AGENT_TOKEN_FOR_TEST");
  }

  JobRunner& Runner(bool cgroups = true, std::vector<int> gpus = {},
                    const std::string& embody_data = "") {
    JobRunnerOptions o;
    o.embody_data = embody_data;
    o.jobs.data_dir = dir_.path();
    o.agent_url = "http://127.0.0.1:1";
    o.jobs.kill_grace = milliseconds(1000);
    o.jobs.rank_exec = EMBODY_AGENT_BINARY;
    o.jobs.sandbox.switch_uid = true;
    o.jobs.sandbox.uid_base = 500000 + static_cast<uid_t>(::getpid() % 5000) * 100;
    o.jobs.sandbox.uid_count = 100;
    o.jobs.sandbox.tenant_gid_base = TenantGidBase();
    o.jobs.sandbox.tenant_gid_count = 100;
    o.dataset_root = dir_.path() + "/datasets";
    if (cgroups) o.jobs.cgroups = cgroups_;
    std::vector<NodeGpu> node_gpus;
    for (int g : gpus) node_gpus.push_back({g, g});
    o.gpus = std::make_shared<GpuPool>(node_gpus);
    runner_.reset();
    pool_ = std::make_unique<UidPool>(o.jobs.sandbox);
    o.uid_pool = pool_.get();
    runner_ = std::make_unique<JobRunner>(o, &logs_);
    return *runner_;
  }
  UidPool& pool() { return *pool_; }

  // Tenant groups of this test process's own, apart from its job uids.
  static gid_t TenantGidBase() { return 8000000 + static_cast<gid_t>(::getpid() % 5000) * 100; }

  static api::Command Job(int64_t id, std::vector<std::string> argv, int ranks = 1,
                          nlohmann::json resources = nlohmann::json::object(),
                          int64_t tenant_id = 1) {
    api::Command c;
    c.type = api::Command::Type::kLaunch;
    c.job_id = id;
    c.tenant_id = tenant_id;
    c.tenant = "tenant-" + std::to_string(tenant_id);
    c.spec = {{"name", "t"}, {"kind", "command"}, {"command", argv}, {"resources", resources}};
    c.hosts = {{1, "node-a", "127.0.0.1", ranks}};
    return c;
  }

  // Everything the job wrote, launcher included.
  std::string Logs(int64_t id, int ranks = 1) {
    std::string all = ReadAll(RankLogs::RankLogPath(runner_->LogDir(id), -1));
    for (int r = 0; r < ranks; ++r) all += ReadAll(RankLogs::RankLogPath(runner_->LogDir(id), r));
    return all;
  }

  // Waits until rank 0 of `id` printed `text`.
  bool WaitForOutput(int64_t id, const std::string& text) {
    for (int i = 0; i < 300; ++i) {
      logs_.Collect(id, false);
      if (Logs(id).find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(milliseconds(50));
    }
    return false;
  }

  // A live process of job `id` running `comm` (its rank, not mpirun).
  pid_t RankPid(int64_t id, const std::string& comm) {
    pid_t mpirun = runner_->LauncherPid(id);
    for (int i = 0; i < 200; ++i) {
      for (const auto& p : JobTree(ListProcesses(), mpirun, mpirun)) {
        if (ReadAll("/proc/" + std::to_string(p.pid) + "/comm") == comm + "\n") return p.pid;
      }
      std::this_thread::sleep_for(milliseconds(50));
    }
    return 0;
  }

  // A daemon that leaves the job's session, marked by its sleep time: each test its own mark, so
  // tests running side by side (ctest -j) never count each other's daemons.
  static std::string Daemon(int mark) {
    return "(setsid sleep " + std::to_string(mark) +
           " </dev/null >/dev/null 2>&1 &); echo started; exit 0";
  }
  static void ExpectNoDaemonLeft(int mark) {
    const std::string want = std::string("sleep") + '\0' + std::to_string(mark) + '\0';
    for (const auto& p : ListProcesses()) {
      if (p.state == 'Z') continue;
      std::string cmdline = ReadAll("/proc/" + std::to_string(p.id.pid) + "/cmdline");
      if (cmdline == want) {
        ADD_FAILURE() << "pid " << p.id.pid << " survived";
        ::kill(p.id.pid, SIGKILL);
      }
    }
  }

  TempDir dir_;
  RankLogs logs_;
  CgroupSetup cgroups_;
  std::unique_ptr<UidPool> pool_;  // before runner_: the runner uses it until destroyed
  std::unique_ptr<JobRunner> runner_;
};

TEST_F(JobSandboxTest, JobRunsAsItsOwnUidWithOnlyItsOwnEnvironment) {
  JobRunner& runner = Runner();
  runner.Launch(Job(21, {"sh", "-c",
                         "echo uid=$(id -u) gid=$(id -g) groups=$(id -G); env; "
                         "echo pwd=$(pwd) home=$HOME tmp=$TMPDIR; touch $TMPDIR/x && echo tmp-ok; "
                         "stat -c 'dir=%a %u' .; stat -c 'mpirun-uid=%u' /proc/$PPID"}));
  auto done = runner.WaitFinished(21, kFinishWithin);
  ASSERT_TRUE(done.has_value());
  std::string log = Logs(21);
  EXPECT_EQ(done->exit_code, 0) << log;
  std::string job_dir = runner.JobDir(21);
  uid_t uid = 0;
  size_t at = log.find("uid=");
  ASSERT_NE(at, std::string::npos) << log;
  uid = static_cast<uid_t>(std::stoul(log.substr(at + 4)));
  EXPECT_GE(uid, 500000u) << log;
  std::string u = std::to_string(uid);
  // One supplementary group: its tenant's (tenant 1).
  const std::string g = std::to_string(TenantGidBase() + 1);
  EXPECT_NE(log.find("uid=" + u + " gid=" + u + " groups=" + u + " " + g + "\n"), std::string::npos)
      << log;
  EXPECT_NE(log.find("mpirun-uid=" + u), std::string::npos) << log;  // the launcher too
  EXPECT_NE(log.find("dir=700 " + u), std::string::npos) << log;
  EXPECT_NE(log.find("pwd=" + job_dir + " home=" + job_dir + " tmp=" + job_dir + "/tmp"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("tmp-ok"), std::string::npos) << log;
  EXPECT_NE(log.find("EMBODY_JOB_ID=21"), std::string::npos) << log;
  EXPECT_EQ(log.find(kAgentMarker), std::string::npos) << log;
  EXPECT_EQ(log.find("EMBODY_AGENT_TOKEN_FOR_TEST"), std::string::npos) << log;
  EXPECT_EQ(log.find("OMPI_ALLOW_RUN_AS_ROOT"), std::string::npos) << log;
  // Once finished, the job's directory is root's again.
  struct stat st;
  ASSERT_EQ(::stat(job_dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
}

TEST_F(JobSandboxTest, AJobCannotReachAnotherJobOrTheAgent) {
  JobRunner& runner = Runner();
  runner.Launch(Job(31, {"sh", "-c", "echo secret-of-b > $HOME/b.txt; echo b-ready; sleep 60"}));
  ASSERT_TRUE(WaitForOutput(31, "b-ready"));
  pid_t b_rank = RankPid(31, "sleep");
  ASSERT_GT(b_rank, 0);
  auto b = runner.Identity(31);
  ASSERT_TRUE(b.has_value());
  std::string b_dir = runner.JobDir(31);
  std::string probe =
      "cat " + b_dir + "/b.txt; ls " + b_dir + "; cat /proc/" + std::to_string(b_rank) +
      "/environ; cat " + dir_.path() + "/node.token; ls " + dir_.path() + "/logs; cat /proc/" +
      std::to_string(::getpid()) + "/environ; kill -STOP " + std::to_string(b_rank) +
      "; echo probe-done";
  runner.Launch(Job(32, {"sh", "-c", probe}));
  auto a = runner.WaitFinished(32, kFinishWithin);
  ASSERT_TRUE(a.has_value());
  std::string log = Logs(32);
  EXPECT_NE(log.find("probe-done"), std::string::npos) << log;
  EXPECT_NE(log.find("Permission denied"), std::string::npos) << log;
  EXPECT_EQ(log.find("secret-of-b"), std::string::npos) << log;
  EXPECT_EQ(log.find(b->token), std::string::npos) << log;
  EXPECT_EQ(log.find(kAgentMarker), std::string::npos) << log;
  EXPECT_EQ(log.find("EMBODY_JOB_TOKEN="), std::string::npos) << log;  // no environ was read
  // Job B was neither stopped nor disturbed.
  EXPECT_EQ(ReadAll("/proc/" + std::to_string(b_rank) + "/stat").find(") T "), std::string::npos);
  EXPECT_EQ(runner.Running(), std::vector<int64_t>{31});
  runner.Kill(31);
  ASSERT_TRUE(runner.WaitFinished(31, kFinishWithin).has_value());
}

// A job names any path it likes (`dir:` datasets, `cat`): the tenant's group decides. Both ranks
// of tenant 1's job (mpirun's children) read tenant 1's dataset; tenant 2's job gets EACCES on
// the file and on listing the directory; a tenant past the range is refused at launch.
TEST_F(JobSandboxTest, AJobReadsOnlyItsOwnTenantsDatasets) {
  JobRunner& runner = Runner();
  const std::string root = dir_.path() + "/datasets";
  SandboxOptions groups;
  groups.tenant_gid_base = TenantGidBase();
  groups.tenant_gid_count = 100;
  ASSERT_TRUE(PrepareDatasetRoot(root, groups).ok());
  const std::string tenant_dir = root + "/tenant-1";
  ASSERT_TRUE(PrepareTenantDir(tenant_dir, *TenantGid(groups, 1)).ok());
  ASSERT_TRUE(common::MakeDirs(tenant_dir + "/dataset-3").ok());
  const std::string file = tenant_dir + "/dataset-3/dataset.json";
  ASSERT_TRUE(common::WriteFileAtomic(file, "episodes-of-tenant-1\n", 0444).ok());
  const std::vector<std::string> probe = {
      "sh", "-c", "cat " + file + "; ls " + tenant_dir + "; echo probe-done"};

  runner.Launch(Job(61, probe, 2, nlohmann::json::object(), 1));
  auto own = runner.WaitFinished(61, kFinishWithin);
  ASSERT_TRUE(own.has_value());
  std::string log = Logs(61, 2);
  EXPECT_EQ(own->exit_code, 0) << log;
  size_t first = log.find("episodes-of-tenant-1");
  ASSERT_NE(first, std::string::npos) << log;
  EXPECT_NE(log.find("episodes-of-tenant-1", first + 1), std::string::npos) << "rank 1: " << log;
  EXPECT_NE(log.find("dataset-3"), std::string::npos) << log;

  runner.Launch(Job(62, probe, 1, nlohmann::json::object(), 2));
  auto other = runner.WaitFinished(62, kFinishWithin);
  ASSERT_TRUE(other.has_value());
  log = Logs(62);
  EXPECT_NE(log.find("probe-done"), std::string::npos) << log;
  EXPECT_EQ(log.find("episodes-of-tenant-1"), std::string::npos) << log;
  EXPECT_NE(log.find("cat: " + file + ": Permission denied"), std::string::npos) << log;
  EXPECT_NE(log.find("cannot open directory '" + tenant_dir + "': Permission denied"),
            std::string::npos)
      << log;

  runner.Launch(Job(63, probe, 1, nlohmann::json::object(), 100));
  auto past = runner.WaitFinished(63, seconds(5));
  ASSERT_TRUE(past.has_value());
  EXPECT_EQ(past->exit_code, 1);
  EXPECT_NE(past->reason.find("tenant 100 has no group on this node"), std::string::npos)
      << past->reason;
  EXPECT_EQ(Logs(63).find("episodes-of-tenant-1"), std::string::npos);
}

// An import job of tenant 1 writes its staging directory inside tenant 1's directory (which it
// enters through its group, and cannot write itself), the agent publishes the version root's,
// and only tenant 1's jobs read it afterwards. embody-data is stood in for by a script that
// writes what the importer would.
TEST_F(JobSandboxTest, AnImportJobPublishesIntoItsTenantsDirectoryOnly) {
  const std::string importer = dir_.path() + "/fake-embody-data";
  ASSERT_TRUE(
      common::WriteFileAtomic(importer,
                              "#!/bin/sh\n"
                              "touch \"$(dirname \"$3\")/../planted\" 2>/dev/null && "
                              "echo PLANTED\n"
                              "mkdir \"$3\" && echo imported-by-tenant-1 > \"$3/dataset.json\"\n",
                              0755)
          .ok());
  JobRunner& importing = Runner(true, {}, importer);
  api::Command job = Job(64, {}, 1, nlohmann::json::object(), 1);
  job.spec = {{"name", "import"},
              {"kind", "import"},
              {"resources", {{"nodes", 1}}},
              {"import", {{"dataset_id", 8}, {"source", {{"path", "/nonexistent/x.hdf5"}}}}}};
  importing.Launch(job);
  auto done = importing.WaitFinished(64, kFinishWithin);
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->exit_code, 0) << done->reason << Logs(64);
  EXPECT_EQ(Logs(64).find("PLANTED"), std::string::npos) << Logs(64);
  const std::string tenant_dir = dir_.path() + "/datasets/tenant-1";
  const std::string version = tenant_dir + "/dataset-8";
  struct stat st {};
  ASSERT_EQ(::stat(tenant_dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, TenantGidBase() + 1);
  EXPECT_EQ(st.st_mode & 07777, 0750u);
  ASSERT_EQ(::stat((version + "/dataset.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 07777, 0444u);
  EXPECT_FALSE(std::filesystem::exists(tenant_dir + "/.import-8"));
  EXPECT_FALSE(std::filesystem::exists(tenant_dir + "/planted"));

  const std::vector<std::string> probe = {"sh", "-c", "cat " + version + "/dataset.json"};
  importing.Launch(Job(65, probe, 1, nlohmann::json::object(), 1));
  importing.Launch(Job(66, probe, 1, nlohmann::json::object(), 2));
  auto own = importing.WaitFinished(65, kFinishWithin);
  auto other = importing.WaitFinished(66, kFinishWithin);
  ASSERT_TRUE(own.has_value() && other.has_value());
  EXPECT_NE(Logs(65).find("imported-by-tenant-1"), std::string::npos) << Logs(65);
  EXPECT_EQ(Logs(66).find("imported-by-tenant-1"), std::string::npos) << Logs(66);
  EXPECT_NE(Logs(66).find("Permission denied"), std::string::npos) << Logs(66);

  // A node without embody-data says so, instead of an exec failure's bare exit code.
  JobRunner& missing = Runner(true, {}, dir_.path() + "/no-such-embody-data");
  job.job_id = 67;
  job.spec["import"]["dataset_id"] = 9;
  missing.Launch(job);
  auto refused = missing.WaitFinished(67, kFinishWithin);
  ASSERT_TRUE(refused.has_value());
  EXPECT_NE(refused->exit_code, 0);
  EXPECT_NE(refused->reason.find("this node cannot run imports: no embody-data at"),
            std::string::npos)
      << refused->reason;
  EXPECT_FALSE(std::filesystem::exists(tenant_dir + "/.import-9"));
}

TEST_F(JobSandboxTest, ArgvNeverBecomesMpirunOptions) {
  JobRunner& runner = Runner();
  // Read by mpirun, these would let the job run as root and set any variable in its ranks.
  runner.Launch(Job(41, {"--allow-run-as-root", "-x", "LD_PRELOAD=/tmp/x.so", "true"}));
  auto first = runner.WaitFinished(41, kFinishWithin);
  ASSERT_TRUE(first.has_value());
  EXPECT_NE(first->exit_code, 0);
  EXPECT_NE(Logs(41).find("cannot execute --allow-run-as-root"), std::string::npos) << Logs(41);
  // ":" after the program starts another application context in Open MPI, even after "--".
  runner.Launch(Job(42, {"sh", "-c", "echo rank $OMPI_COMM_WORLD_RANK of $OMPI_COMM_WORLD_SIZE",
                         "x", ":", "-np", "3", "sh", "-c", "echo extra-app"}));
  auto second = runner.WaitFinished(42, kFinishWithin);
  ASSERT_TRUE(second.has_value());
  std::string log = Logs(42, 4);
  EXPECT_EQ(second->exit_code, 0) << log;
  EXPECT_NE(log.find("rank 0 of 1"), std::string::npos) << log;
  EXPECT_EQ(log.find("extra-app"), std::string::npos) << log;
}

TEST_F(JobSandboxTest, MemoryLimitIsEnforced) {
  const char* kAllocate = "import sys; b = bytearray(int(sys.argv[1]) << 20); b[::4096] = "
                          "b'x' * len(b[::4096]); print('allocated', sys.argv[1])";
  nlohmann::json res = {{"memory_per_rank_bytes", 64 << 20}};
  for (bool cgroups : {true, false}) {
    if (cgroups && cgroups_.version == CgroupVersion::kNone) continue;
    SCOPED_TRACE(cgroups ? "cgroup" : "RLIMIT_AS");
    JobRunner& runner = Runner(cgroups);
    int64_t base = cgroups ? 50 : 60;
    runner.Launch(Job(base, {"/usr/bin/python3", "-c", kAllocate, "8"}, 1, res));
    auto small = runner.WaitFinished(base, kFinishWithin);
    ASSERT_TRUE(small.has_value());
    EXPECT_EQ(small->exit_code, 0) << Logs(base);
    runner.Launch(Job(base + 1, {"/usr/bin/python3", "-c", kAllocate, "512"}, 1, res));
    auto big = runner.WaitFinished(base + 1, kFinishWithin);
    ASSERT_TRUE(big.has_value());
    std::string log = Logs(base + 1);
    EXPECT_NE(big->exit_code, 0) << log;
    EXPECT_EQ(log.find("allocated 512"), std::string::npos) << log;
    if (cgroups) {
      EXPECT_NE(big->reason.find("memory limit of 67108864 bytes reached"), std::string::npos)
          << big->reason;
    } else {
      EXPECT_NE(log.find("MemoryError"), std::string::npos) << log;
    }
  }
}

TEST_F(JobSandboxTest, CgroupComesAndGoesWithTheJobAndCatchesEscapees) {
  if (cgroups_.version == CgroupVersion::kNone) GTEST_SKIP() << "no cgroups: " << cgroups_.note;
  JobRunner& runner = Runner();
  // The daemon leaves the job's session and process tree (and lets go of the rank's output, or
  // mpirun would wait for it); only the cgroup and the uid still know it.
  runner.Launch(Job(71, {"sh", "-c", Daemon(987)}, 1, {{"memory_per_rank_bytes", 256 << 20}}));
  std::vector<std::string> cg_dirs;
  for (const auto& [controller, parent] : cgroups_.parents) cg_dirs.push_back(parent + "/job-71");
  pid_t mpirun = runner.LauncherPid(71);
  std::string mpirun_cgroup = ReadAll("/proc/" + std::to_string(mpirun) + "/cgroup");
  for (const auto& d : cg_dirs) EXPECT_EQ(::access(d.c_str(), F_OK), 0) << d;
  auto done = runner.WaitFinished(71, kFinishWithin);
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->exit_code, 0) << Logs(71);
  EXPECT_NE(mpirun_cgroup.find("/job-71"), std::string::npos) << mpirun_cgroup;
  for (const auto& d : cg_dirs) EXPECT_NE(::access(d.c_str(), F_OK), 0) << d << " was not removed";
  ExpectNoDaemonLeft(987);
}

TEST_F(JobSandboxTest, WhatAJobLeavesInSharedScratchPlacesGoesWithIt) {
  JobRunner& runner = Runner();
  const std::string tag = "embody-leftover-" + std::to_string(::getpid());
  const std::vector<std::string> paths = {"/tmp/" + tag, "/var/tmp/" + tag, "/dev/shm/" + tag};
  std::string script;
  for (const auto& p : paths) script += "echo secret > " + p + "; ";
  script += "mkdir /tmp/" + tag + "-dir && echo secret > /tmp/" + tag + "-dir/f; ls " + paths[0] +
            " " + paths[2] + " && echo written";
  runner.Launch(Job(81, {"sh", "-c", script}));
  auto done = runner.WaitFinished(81, kFinishWithin);
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->exit_code, 0) << Logs(81);
  EXPECT_NE(Logs(81).find("written"), std::string::npos) << Logs(81);
  // The walk runs after the job's end is reported, before its uid can go to another job.
  pool().WaitScrubbed();
  for (const auto& p : paths) EXPECT_FALSE(std::filesystem::exists(p)) << p;
  EXPECT_FALSE(std::filesystem::exists("/tmp/" + tag + "-dir"));
}

TEST_F(JobSandboxTest, WithoutCgroupsTheUidSweepCatchesEscapees) {
  JobRunner& runner = Runner(/*cgroups=*/false);
  runner.Launch(Job(72, {"sh", "-c", Daemon(986)}));
  auto done = runner.WaitFinished(72, kFinishWithin);
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->exit_code, 0) << Logs(72);
  ExpectNoDaemonLeft(986);
}

TEST_F(JobSandboxTest, TheAgentReadsNoFileForTheJob) {
  JobRunner& runner = Runner();
  // Rank 0 swaps its own output file for a link to the agent's credential, and a FIFO the agent
  // would block on for the output of rank 1.
  runner.Launch(Job(81, {"sh", "-c",
                         "echo before; if [ $OMPI_COMM_WORLD_RANK = 0 ]; then "
                         "rm -f ranks/rank.0/stdout; ln -s " + dir_.path() + "/node.token "
                         "ranks/rank.0/stdout; rm -f ranks/rank.1/stderr; mkfifo ranks/rank.1/stderr; "
                         "fi; sleep 1"},
                    2));
  auto done = runner.WaitFinished(81, kFinishWithin);
  ASSERT_TRUE(done.has_value());
  auto batch = logs_.NextBatch();
  std::string shipped;
  for (const auto& c : batch.chunks) shipped += c.data;
  EXPECT_EQ(shipped.find(kAgentMarker), std::string::npos) << shipped;
  EXPECT_EQ(Logs(81, 2).find(kAgentMarker), std::string::npos);
}

TEST_F(JobSandboxTest, GpusAreSharedOutWithoutOverlap) {
  JobRunner& runner = Runner(true, {0, 1, 2});
  nlohmann::json gpu = {{"slot_type", "gpu"}, {"slots_per_rank", 1}};
  const std::string kShow = "echo gpus=[$CUDA_VISIBLE_DEVICES] order=$CUDA_DEVICE_ORDER; sleep 30";
  runner.Launch(Job(91, {"sh", "-c", kShow}, 2, gpu));
  runner.Launch(Job(92, {"sh", "-c", kShow}, 1, gpu));
  runner.Launch(Job(93, {"sh", "-c", kShow}, 1, {{"slot_type", "cpu"}}));
  runner.Launch(Job(94, {"sh", "-c", kShow}, 1, gpu));  // none left
  EXPECT_TRUE(WaitForOutput(91, "gpus=[0,1] order=PCI_BUS_ID")) << Logs(91, 2);
  EXPECT_TRUE(WaitForOutput(92, "gpus=[2]")) << Logs(92);
  EXPECT_TRUE(WaitForOutput(93, "gpus=[]")) << Logs(93);
  auto refused = runner.WaitFinished(94, seconds(5));
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->reason, "the job needs 1 GPUs and 0 are free on this node");
  runner.Kill(91);
  ASSERT_TRUE(runner.WaitFinished(91, kFinishWithin).has_value());
  EXPECT_EQ(runner.GpusInUse(), std::vector<int>{2});
  runner.Launch(Job(95, {"sh", "-c", kShow}, 1, gpu));
  EXPECT_TRUE(WaitForOutput(95, "gpus=[0]")) << Logs(95);
  runner.KillAllAndWait("test over");
  EXPECT_TRUE(runner.GpusInUse().empty());
}

}  // namespace
}  // namespace agent
