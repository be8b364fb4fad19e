// agent::Agent's life cycle without a server (registration keeps failing, which is fine here):
// Create starts nothing, Start serves the local API and writes the port file, Stop ends every
// thread promptly and again is a no-op. A run against a real server is
// tests/e2e/agent_in_process_test.cc.
#include "agent/agent.h"

#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <httplib.h>

#include <gtest/gtest.h>

#include "agent/testing/test_util.h"
#include "common/crypto.h"

namespace agent {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

AgentOptions Options(const std::string& dir) {
  AgentOptions o;
  o.server = "http://127.0.0.1:1";  // nothing listens: registration fails and is retried
  o.token = "join-token";
  o.name = "node-agent-test";
  o.data_dir = dir + "/data";
  o.port_file = dir + "/port";
  o.agent_binary = EMBODY_AGENT_BINARY;
  o.slots = 1;
  o.run_jobs_as_agent = true;
  o.no_cgroups = true;
  o.nvml_library = "/nonexistent/libnvidia-ml.so.1";
  return o;
}

TEST(AgentTest, StartServesAndStopEndsEveryThread) {
  TempDir dir;
  const int before = ThreadCount();
  auto created = Agent::Create(Options(dir.path()));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  std::unique_ptr<Agent> a = std::move(*created);
  EXPECT_EQ(ThreadCount(), before) << "Create starts no thread";
  EXPECT_EQ(a->local_api_port(), 0);
  EXPECT_EQ(a->data_dir(), dir.path() + "/data");
  EXPECT_FALSE(a->isolation().unprivileged_uid);

  ASSERT_TRUE(a->Start().ok());
  EXPECT_GT(ThreadCount(), before);
  const int port = a->local_api_port();
  ASSERT_GT(port, 0);
  EXPECT_EQ(ReadAll(dir.path() + "/port"), std::to_string(port) + "\n");
  EXPECT_EQ(a->local_api_url(), "http://127.0.0.1:" + std::to_string(port));
  httplib::Client cli("127.0.0.1", port);
  auto metrics = cli.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_NE(metrics->body.find("embody_node_"), std::string::npos);
  EXPECT_EQ(a->node_id(), 0);  // no server
  EXPECT_FALSE(a->Start().ok());

  const auto t0 = steady_clock::now();
  a->Stop();
  EXPECT_LT(std::chrono::duration_cast<milliseconds>(steady_clock::now() - t0).count(), 2000);
  EXPECT_EQ(ThreadCountSettlingAt(before), before);
  EXPECT_FALSE(cli.Get("/metrics")) << "the local API still answers after Stop";
  a->Stop();
  EXPECT_FALSE(a->Start().ok());
  a.reset();
  EXPECT_EQ(ThreadCount(), before);
}

TEST(AgentTest, DestructorStopsAStartedAgent) {
  TempDir dir;
  const int before = ThreadCount();
  {
    auto created = Agent::Create(Options(dir.path()));
    ASSERT_TRUE(created.ok());
    ASSERT_TRUE((*created)->Start().ok());
  }
  EXPECT_EQ(ThreadCountSettlingAt(before), before);
}

TEST(AgentTest, CreateFailsOnADataDirectoryItCannotMake) {
  TempDir dir;
  AppendTo(dir.path() + "/file", "x");
  AgentOptions o = Options(dir.path());
  o.data_dir = dir.path() + "/file/data";
  auto created = Agent::Create(o);
  EXPECT_FALSE(created.ok());
}

TEST(AgentTest, CreateWantsTheAgentBinary) {
  TempDir dir;
  AgentOptions o = Options(dir.path());
  o.agent_binary.clear();
  auto created = Agent::Create(o);
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().field(), "agent_binary");
  EXPECT_FALSE(std::filesystem::exists(o.data_dir)) << "refused before anything was made";
}

TEST(AgentTest, ConfinedJobNetworkNeedsJobsUnderUidsOfTheirOwn) {
  TempDir dir;
  AgentOptions o = Options(dir.path());  // --run-jobs-as-agent
  o.job_network = "confined";
  auto created = Agent::Create(o);
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().code(), common::Code::kFailedPrecondition);
  EXPECT_NE(created.status().message().find("--job-network=confined"), std::string::npos)
      << created.status().message();
  o.job_network = "host";
  EXPECT_TRUE(Agent::Create(o).ok());
}

bool NftTableExists(const std::string& data_dir) {
  const std::string table = "embody_jobs_" + common::Sha256Hex(data_dir).substr(0, 12);
  return std::system(("nft list table inet " + table + " >/dev/null 2>&1").c_str()) == 0;
}

// As root, by default: the agent's table is made at Create and deleted at Stop; without a usable
// nft the agent refuses to start, naming the way out.
TEST(AgentTest, ARootAgentConfinesJobsNetworkByDefault) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  if (std::system("nft list tables >/dev/null 2>&1") != 0) GTEST_SKIP() << "no usable nft";
  TempDir dir;
  AgentOptions o = Options(dir.path());
  o.run_jobs_as_agent = false;
  o.nft = dir.path() + "/no-nft";
  auto refused = Agent::Create(o);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--job-network=host"), std::string::npos)
      << refused.status().message();

  o.nft = "nft";
  auto created = Agent::Create(o);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  const std::string data_dir = (*created)->data_dir();
  EXPECT_TRUE(NftTableExists(data_dir));
  ASSERT_TRUE((*created)->Start().ok());
  (*created)->Stop();
  EXPECT_FALSE(NftTableExists(data_dir));
}

}  // namespace
}  // namespace agent
