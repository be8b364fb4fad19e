// A job's network on a live stack (agent/sandbox/job_network.h): two agents on loopback, as
// root, so each confines its jobs by default. A command job cannot open a connection to
// embody-server (refused at once, not a timeout) while it reaches its own agent; a two-node gloo
// job (one rank per node, through the rsh bridge) still trains; the agents' tables go when they
// stop (checked as the suite ends). Skipped where the test is not root or nft is missing; the gloo
// case also without python3-torch.
#include <unistd.h>

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "common/crypto.h"
#include "tests/e2e/local_stack.h"

namespace embody_test {
namespace {

using nlohmann::json;

bool HaveNft() { return std::system("nft list tables >/dev/null 2>&1") == 0; }
bool HaveTorch() {
  return std::system("/usr/bin/python3 -c 'import torch.distributed' >/dev/null 2>&1") == 0;
}
bool TableExists(const std::string& data_dir) {
  const std::string table = "embody_jobs_" + common::Sha256Hex(data_dir).substr(0, 12);
  return std::system(("nft list table inet " + table + " >/dev/null 2>&1").c_str()) == 0;
}

class JobNetworkTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::geteuid() != 0 || !HaveNft()) return;
    stack_ = new LocalStack(2, 2);
    ASSERT_TRUE(stack_->Start()) << "stack in " << stack_->dir();
  }
  // The agents stop cleanly with the stack, and their tables go with them.
  static void TearDownTestSuite() {
    if (stack_ == nullptr) return;
    const std::string dirs[] = {stack_->agent_data_dir(0), stack_->agent_data_dir(1)};
    for (const std::string& dir : dirs) EXPECT_TRUE(TableExists(dir)) << dir;
    delete stack_;
    stack_ = nullptr;
    for (const std::string& dir : dirs) EXPECT_FALSE(TableExists(dir)) << dir;
  }
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root: only a root agent confines jobs";
    if (!HaveNft()) GTEST_SKIP() << "no usable nft (Debian package nftables)";
    ASSERT_NE(stack_, nullptr);
  }
  static int64_t Submit(const json& spec) { return stack_->SubmitJob(spec); }
  static std::string Logs(int64_t id, int rank) { return stack_->JobLog(id, rank); }
  static std::string LogsOnceHolding(int64_t id, int rank, const std::string& marker) {
    std::string log;
    for (int i = 0; i < 100 && log.find(marker) == std::string::npos; ++i) {
      log = Logs(id, rank);
      ::usleep(100'000);
    }
    return log;
  }

  static LocalStack* stack_;
};

LocalStack* JobNetworkTest::stack_ = nullptr;

TEST_F(JobNetworkTest, AJobCannotReachTheControlPlaneButReachesItsAgent) {
  const std::string url = stack_->url();
  const int server_port = std::stoi(url.substr(url.rfind(':') + 1));
  // Exit 0 only when the server refuses within 5 s and the agent answers.
  const std::string script =
      "import os, socket, sys, time, urllib.parse\n"
      "def attempt(host, port):\n"
      "    t = time.monotonic()\n"
      "    try:\n"
      "        socket.create_connection((host, port), timeout=10).close()\n"
      "        return 'connected', time.monotonic() - t\n"
      "    except OSError as e:\n"
      "        return type(e).__name__, time.monotonic() - t\n"
      "server = attempt('127.0.0.1', " +
      std::to_string(server_port) +
      ")\n"
      "agent = urllib.parse.urlsplit(os.environ['EMBODY_AGENT_URL'])\n"
      "mine = attempt(agent.hostname, agent.port)\n"
      "print('server', server[0], round(server[1], 2), 'agent', mine[0], flush=True)\n"
      "sys.exit(0 if server[0] == 'ConnectionRefusedError' and server[1] < 5 and\n"
      "         mine[0] == 'connected' else 3)\n";
  const int64_t id = Submit({{"name", "reach-server"},
                             {"kind", "command"},
                             {"resources", {{"nodes", 1}, {"ranks_per_node", 1}}},
                             {"command", {"/usr/bin/python3", "-c", script}}});
  ASSERT_GT(id, 0);
  json job = stack_->WaitForState(id, {"SUCCEEDED", "FAILED", "CANCELLED"}, 120);
  const std::string log = LogsOnceHolding(id, 0, "server ");
  EXPECT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump(2) << log << Logs(id, -1);
  EXPECT_NE(log.find("server ConnectionRefusedError"), std::string::npos) << log;
  EXPECT_NE(log.find("agent connected"), std::string::npos) << log;
}

TEST_F(JobNetworkTest, ATwoNodeGlooJobStillTrains) {
  if (!HaveTorch()) GTEST_SKIP() << "no torch for /usr/bin/python3 (Debian package python3-torch)";
  const std::string script =
      "import torch, torch.distributed as dist\n"
      "dist.init_process_group('gloo', init_method='env://')\n"
      "w = torch.zeros(4, requires_grad=True)\n"
      "opt = torch.optim.SGD([w], lr=1.0)\n"
      "target = torch.full((4,), float(dist.get_rank() + 1))\n"
      "for step in range(20):\n"
      "    opt.zero_grad()\n"
      "    loss = ((w - target) ** 2).mean()\n"
      "    loss.backward()\n"
      "    dist.all_reduce(w.grad)\n"
      "    w.grad /= dist.get_world_size()\n"
      "    opt.step()\n"
      "total = torch.tensor([loss.item()])\n"
      "dist.all_reduce(total)\n"
      "print('trained rank', dist.get_rank(), 'of', dist.get_world_size(), 'w', round(w[0].item(), "
      "3),\n"
      "      flush=True)\n"
      "dist.destroy_process_group()\n";
  const int64_t id = Submit({{"name", "gloo-two-nodes"},
                             {"kind", "command"},
                             {"resources", {{"nodes", 2}, {"ranks_per_node", 1}}},
                             {"command", {"/usr/bin/python3", "-c", script}}});
  ASSERT_GT(id, 0);
  json job = stack_->WaitForState(id, {"SUCCEEDED", "FAILED", "CANCELLED"}, 240);
  EXPECT_EQ(job.value("state", ""), "SUCCEEDED")
      << job.dump(2) << Logs(id, -1) << Logs(id, 0) << Logs(id, 1);
  // Both ranks averaged their gradients: w reaches the mean of their targets, 1.5, on both
  // (each step halves the distance to it).
  for (int rank : {0, 1}) {
    const std::string log = LogsOnceHolding(id, rank, "trained rank");
    EXPECT_NE(log.find("trained rank " + std::to_string(rank) + " of 2 w 1.5\n"), std::string::npos)
        << log;
  }
}

}  // namespace
}  // namespace embody_test
