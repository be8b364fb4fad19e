#include "agent/rsh/rsh_bridge.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "common/crypto.h"

namespace agent {
namespace {

api::Command Worker(int64_t job_id, const std::string& token) {
  api::Command w;
  w.type = api::Command::Type::kWorker;
  w.job_id = job_id;
  w.tenant_id = 1;
  w.attempt = 0;
  w.spec = {{"kind", "command"}, {"command", {"true"}}};
  w.job_token_sha256 = common::Sha256Hex(token);
  w.hosts = {{2, "b", "10.0.0.2", 1, "http://10.0.0.2:1"}};
  return w;
}

class RshBridgeTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("rsh-bridge-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    RshBridgeOptions o;
    o.jobs.data_dir = dir_.string();
    o.jobs.address = "10.0.0.2";
    o.jobs.sandbox.switch_uid = false;
    o.max_daemons = 1;
    pool_ = std::make_unique<UidPool>(o.jobs.sandbox);
    bridge_ = std::make_unique<RshBridge>(o, pool_.get(), &logs_);
  }
  void TearDown() override {
    bridge_.reset();
    std::filesystem::remove_all(dir_);
  }

  common::Code Refusal(int64_t job, const std::string& auth, const std::string& body) {
    auto r = bridge_->Start(job, auth, body);
    return r.ok() ? common::Code::kOk : r.status().code();
  }

  std::filesystem::path dir_;
  RankLogs logs_;
  std::unique_ptr<UidPool> pool_;
  std::unique_ptr<RshBridge> bridge_;
};

const char kOrted[] = R"({"argv": [" orted", "-mca", "ess", "\"env\""]})";

// Only a job the server placed here, with that job's token, for Open MPI's daemon.
TEST_F(RshBridgeTest, RefusesWhatTheServerDidNotPlaceHereOrAnotherJobsToken) {
  bridge_->SetAssignments({Worker(7, "token-of-7"), Worker(8, "token-of-8")});
  EXPECT_EQ(Refusal(9, "Bearer token-of-7", kOrted), common::Code::kNotFound);
  EXPECT_EQ(Refusal(7, "Bearer token-of-8", kOrted), common::Code::kUnauthenticated);
  EXPECT_EQ(Refusal(7, "token-of-7", kOrted), common::Code::kUnauthenticated);
  EXPECT_EQ(Refusal(7, "", kOrted), common::Code::kUnauthenticated);
  EXPECT_EQ(Refusal(7, "Bearer " + common::Sha256Hex("token-of-7"), kOrted),
            common::Code::kUnauthenticated);  // the digest is not the token
  // The right token, the wrong program or body.
  EXPECT_EQ(Refusal(7, "Bearer token-of-7", R"({"argv": ["/bin/sh", "-c", "id"]})"),
            common::Code::kInvalidArgument);
  EXPECT_EQ(Refusal(7, "Bearer token-of-7", R"({"argv": ["orted", ";", "id"]})"),
            common::Code::kInvalidArgument);
  EXPECT_EQ(Refusal(7, "Bearer token-of-7", R"({"argv": "orted"})"),
            common::Code::kInvalidArgument);
  EXPECT_EQ(Refusal(7, "Bearer token-of-7", R"({"argv": ["orted", 3]})"),
            common::Code::kInvalidArgument);
  EXPECT_EQ(Refusal(7, "Bearer token-of-7", "not json"), common::Code::kInvalidArgument);
  EXPECT_EQ(Refusal(7, "Bearer token-of-7", std::string(1 << 20, ' ')),
            common::Code::kInvalidArgument);
  // Once the server no longer lists the job here (it ended), its token opens nothing.
  bridge_->SetAssignments({Worker(8, "token-of-8")});
  EXPECT_EQ(Refusal(7, "Bearer token-of-7", kOrted), common::Code::kNotFound);
  // Nor after a kill, nor for a new attempt's token once the old one is replaced.
  bridge_->Kill(8);
  EXPECT_EQ(Refusal(8, "Bearer token-of-8", kOrted), common::Code::kNotFound);
  bridge_->SetAssignments({Worker(8, "new-attempt")});
  EXPECT_EQ(Refusal(8, "Bearer token-of-8", kOrted), common::Code::kUnauthenticated);
  EXPECT_TRUE(bridge_->Running().empty());
}

// A short worker command keeps the assignment held in full of that attempt, and nothing else.
TEST_F(RshBridgeTest, AShortWorkerCommandKeepsOnlyWhatIsHeldInFull) {
  bridge_->SetAssignments({Worker(7, "token-of-7")});
  EXPECT_EQ(bridge_->HeldAssignments(), (std::vector<api::LaunchAck>{{7, 0}}));
  api::Command held;
  held.type = api::Command::Type::kWorker;
  held.held = true;
  held.job_id = 7;
  held.attempt = 0;
  api::Command unknown = held;
  unknown.job_id = 8;
  bridge_->SetAssignments({held, unknown});
  EXPECT_EQ(bridge_->HeldAssignments(), (std::vector<api::LaunchAck>{{7, 0}}));
  // The assignment kept is the full one: its token still opens it (the request then fails on
  // the body, past the token check).
  EXPECT_EQ(Refusal(7, "Bearer token-of-7", "not json"), common::Code::kInvalidArgument);
  // A short command for another attempt keeps nothing.
  held.attempt = 1;
  bridge_->SetAssignments({held});
  EXPECT_TRUE(bridge_->HeldAssignments().empty());
  EXPECT_EQ(Refusal(7, "Bearer token-of-7", kOrted), common::Code::kNotFound);
}

// A restarted agent first stops the daemons its predecessor left (their records), whatever
// their watchers have or have not done yet, and forgets them.
TEST_F(RshBridgeTest, StopLeftoversStopsWhatAnEarlierAgentRecorded) {
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::setsid();
    ::execlp("sleep", "sleep", "300", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  JobProcesses procs;
  procs.job_id = 11;
  for (int i = 0; i < 100 && procs.launcher.start_time == 0; ++i) {
    procs.launcher = ProcessIdOf(pid);
    ::usleep(10'000);
  }
  procs.launcher.pid = pid;
  JobRecord r;
  r.job_id = 11;
  r.attempt = 2;
  r.processes = procs;
  std::filesystem::create_directories(dir_ / "daemons");
  const JobRecords records(dir_.string() + "/daemons/running");
  if (!records.Save(r).ok()) ::kill(pid, SIGKILL);
  ASSERT_TRUE(records.LoadAll().size() == 1);
  EXPECT_EQ(bridge_->StopLeftovers(), 1);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status)) << status;
  EXPECT_TRUE(records.LoadAll().empty());
  EXPECT_EQ(bridge_->StopLeftovers(), 0);
}

// A gpu job's part on this node takes GPUs of its own from the node's pool, which the jobs this
// node heads share: its daemon (and so every rank it starts) sees those, a cpu job's part sees
// none, a part the pool cannot serve is refused taking nothing, and the GPUs go back when the
// daemon ends.
TEST(RshBridgeGpuTest, AGpuJobsPartGetsGpusOfItsOwnFromTheNodesPool) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("rsh-bridge-gpu-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "bin");
  std::filesystem::create_directories(dir / "data" / "jobs");  // as the agent makes them
  std::filesystem::create_directories(dir / "data" / "logs");
  {
    // The daemon as Open MPI's would be found beside mpirun; it shows what its ranks inherit.
    std::ofstream orted(dir / "bin" / "orted");
    orted << "#!/bin/sh\necho \"gpus=[$CUDA_VISIBLE_DEVICES] order=$CUDA_DEVICE_ORDER\"\n"
             "sleep 0.5\n";
  }
  std::filesystem::permissions(dir / "bin" / "orted", std::filesystem::perms::owner_all);
  RshBridgeOptions o;
  o.jobs.data_dir = (dir / "data").string();
  o.jobs.address = "10.0.0.2";
  o.jobs.mpirun = (dir / "bin" / "mpirun").string();
  o.jobs.sandbox.switch_uid = false;
  o.max_daemons = 4;
  o.gpus = std::make_shared<GpuPool>(std::vector<NodeGpu>{{0, 0}, {1, 1}, {2, 7}});
  ASSERT_TRUE(o.gpus->Take(HeadGpuHolder(99), 1).ok());  // a job this node heads holds GPU 0
  RankLogs logs;
  UidPool uids(o.jobs.sandbox);
  auto bridge = std::make_unique<RshBridge>(o, &uids, &logs);

  auto gpu_worker = [](int64_t id, int ranks) {
    api::Command w = Worker(id, "token-of-" + std::to_string(id));
    w.spec["resources"] = {{"nodes", 2}, {"ranks_per_node", ranks}, {"slot_type", "gpu"},
                           {"slots_per_rank", 1}};
    w.hosts[0].ranks = ranks;
    return w;
  };
  api::Command cpu = Worker(9, "token-of-9");
  cpu.spec["resources"] = {{"nodes", 2}, {"ranks_per_node", 1}, {"slot_type", "cpu"}};
  bridge->SetAssignments({gpu_worker(7, 1), gpu_worker(8, 2), cpu});
  auto output_of = [](const std::shared_ptr<RemoteDaemon>& d) {
    std::string out;
    for (int i = 0; i < 100 && out.find('\n') == std::string::npos; ++i) {
      out += d->Next(std::chrono::milliseconds(50)).output;
    }
    return out;
  };

  auto seven = bridge->Start(7, "Bearer token-of-7", kOrted);
  ASSERT_TRUE(seven.ok()) << seven.status().ToString();
  EXPECT_EQ(output_of(*seven), "gpus=[1] order=PCI_BUS_ID\n");
  EXPECT_EQ(o.gpus->InUse(), (std::vector<int>{0, 1}));
  // Two ranks of GPUs with one free: refused, nothing taken.
  auto eight = bridge->Start(8, "Bearer token-of-8", kOrted);
  ASSERT_FALSE(eight.ok());
  EXPECT_EQ(eight.status().code(), common::Code::kFailedPrecondition) << eight.status().ToString();
  EXPECT_EQ(o.gpus->InUse(), (std::vector<int>{0, 1}));
  auto nine = bridge->Start(9, "Bearer token-of-9", kOrted);
  ASSERT_TRUE(nine.ok()) << nine.status().ToString();
  EXPECT_EQ(output_of(*nine), "gpus=[] order=PCI_BUS_ID\n");
  // Daemon 7 ends: its GPU is free again; the head's job keeps its own.
  for (int i = 0; i < 100; ++i) {
    if ((*seven)->Next(std::chrono::milliseconds(50)).exit_code) break;
  }
  EXPECT_EQ(o.gpus->InUse(), (std::vector<int>{0}));
  bridge.reset();
  std::filesystem::remove_all(dir);
}

TEST(GpuPoolTest, TakesFreeGpusOncePerHolderAndDeniesTheOthersByMinor) {
  GpuPool pool({{0, 4}, {1, 5}, {2, 6}});
  auto a = pool.Take(HeadGpuHolder(1), 2);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, (std::vector<int>{0, 1}));
  EXPECT_EQ(pool.MinorsExcept(*a), (std::vector<int>{6}));
  EXPECT_EQ(pool.MinorsExcept({}), (std::vector<int>{4, 5, 6}));
  EXPECT_EQ(pool.Take(HeadGpuHolder(1), 1).status().code(), common::Code::kFailedPrecondition);
  auto b = pool.Take(DaemonGpuHolder(2), 2);
  EXPECT_EQ(b.status().code(), common::Code::kFailedPrecondition);
  EXPECT_NE(b.status().message().find("1 are free"), std::string::npos) << b.status().ToString();
  EXPECT_EQ(pool.InUse(), (std::vector<int>{0, 1}));
  auto none = pool.Take(DaemonGpuHolder(3), 0);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  pool.Release(HeadGpuHolder(1));
  auto c = pool.Take(DaemonGpuHolder(2), 3);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, (std::vector<int>{0, 1, 2}));
  pool.Release(DaemonGpuHolder(2));
  EXPECT_TRUE(pool.InUse().empty());
}

// A part of a job in an image: the head asks whether the image is ready here before it starts
// mpirun (agent/images/peer_images.h), with the job's token as for the daemon. A node that cannot
// run images says so, naming the image, and refuses the daemon with the same reason.
TEST_F(RshBridgeTest, ImageReadinessNeedsTheJobsTokenAndSaysWhyAnImageCannotBePrepared) {
  api::Command plain = Worker(7, "token-of-7");
  api::Command image = Worker(8, "token-of-8");
  image.spec["environment"] = {{"image",
                                {{"name", "torch-env@2"},
                                 {"path", "/srv/datasets/tenant-1/dataset-3"},
                                 {"digest", "sha256:" + std::string(64, 'a')}}}};
  api::Command malformed = Worker(9, "token-of-9");
  malformed.spec["environment"] = {{"image", {{"name", "x@1"}, {"path", "../x"}}}};
  bridge_->SetAssignments({plain, image, malformed});
  auto ready = bridge_->ImageReady(7, "Bearer token-of-7");
  ASSERT_TRUE(ready.ok()) << ready.status().ToString();
  EXPECT_TRUE(*ready);  // no image: nothing to wait for
  EXPECT_EQ(bridge_->ImageReady(7, "Bearer token-of-8").status().code(),
            common::Code::kUnauthenticated);
  EXPECT_EQ(bridge_->ImageReady(10, "Bearer token-of-7").status().code(),
            common::Code::kNotFound);
  auto no_cache = bridge_->ImageReady(8, "Bearer token-of-8");
  EXPECT_EQ(no_cache.status().code(), common::Code::kFailedPrecondition);
  EXPECT_NE(no_cache.status().message().find("torch-env@2"), std::string::npos)
      << no_cache.status().ToString();
  EXPECT_NE(no_cache.status().message().find("no image cache"), std::string::npos)
      << no_cache.status().ToString();
  EXPECT_EQ(Refusal(8, "Bearer token-of-8", kOrted), common::Code::kFailedPrecondition);
  EXPECT_EQ(bridge_->ImageReady(9, "Bearer token-of-9").status().code(),
            common::Code::kInvalidArgument);
  EXPECT_EQ(Refusal(9, "Bearer token-of-9", kOrted), common::Code::kInvalidArgument);
  EXPECT_TRUE(bridge_->Running().empty());
}

}  // namespace
}  // namespace agent
