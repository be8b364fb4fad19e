#include "agent/rsh_bridge.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

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

}  // namespace
}  // namespace agent
