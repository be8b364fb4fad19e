// Jobs across machines through the rsh bridge (docs/multinode.md), with each agent in a network
// namespace of its own: the test makes two namespaces joined by a bridge in the root namespace
// (10.213.N.0/24, N from the test's pid, chosen clear of the usual private ranges), where
// PostgreSQL and embody-server run. Each agent has its own address, data directory and local
// API, so a rank on node-b can only have been started by node-b's agent, at node-a's request.
//
// Needs root and `ip netns`; skipped with the reason otherwise. The namespaces, links and bridge
// are removed when the suite ends, however it ends (the destructor, and a trap-like atexit).
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>

#include "storage/testing/robomimic_file.h"
#include "tests/e2e/local_stack.h"
#include "tests/e2e/stack_datasets.h"
#include "tests/support/netns.h"

namespace embody_test {
namespace {

using nlohmann::json;

using embody::testing::Sh;
using Netns = embody::testing::TwoNamespaces;

Netns* g_net = nullptr;

class MultiNodeNetnsTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::geteuid() != 0) {
      skip_ = "needs root to make network namespaces";
      return;
    }
    if (Sh("ip netns list") != 0) {
      skip_ = "`ip netns` is not available";
      return;
    }
    g_net = new Netns("emb", 213);
    std::atexit([] {
      if (g_net) g_net->Down();
    });
    if (std::string failed; !g_net->Up(&failed)) {
      std::fprintf(stderr, "network set-up failed at: %s\n", failed.c_str());
      skip_ = "cannot make the test's network namespaces here";
      return;
    }
    stack_ = new LocalStack(2, 2);
    stack_->SetServerHost(g_net->server);
    stack_->PlaceAgent(0, {"ip", "netns", "exec", g_net->ns_a}, g_net->addr_a);
    stack_->PlaceAgent(1, {"ip", "netns", "exec", g_net->ns_b}, g_net->addr_b);
    stack_->EnableDatasetRoot();
    ASSERT_TRUE(stack_->Start());
  }
  static void TearDownTestSuite() {
    delete stack_;
    stack_ = nullptr;
    if (g_net) g_net->Down();
    delete g_net;
    g_net = nullptr;
  }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    if (stack_ == nullptr) FAIL() << "the stack did not start";
  }

  int64_t Submit(const json& spec) {
    HttpResult r = stack_->Post("/v1/jobs", spec.dump());
    EXPECT_EQ(r.status, 201) << r.text;
    return r.status == 201 ? r.body["id"].get<int64_t>() : 0;
  }
  std::string Logs(int64_t id, int rank) {
    return stack_->Get("/v1/jobs/" + std::to_string(id) + "/logs?rank=" + std::to_string(rank))
        .text;
  }

  static LocalStack* stack_;
  static std::string skip_;
};

LocalStack* MultiNodeNetnsTest::stack_ = nullptr;
std::string MultiNodeNetnsTest::skip_;

// A one-node, one-rank job that sleeps `marker` seconds (so CountSleeps finds its processes) and
// restarts once after its node is lost.
json RestartableSleep(const std::string& name, const std::string& marker) {
  return {{"name", name},
          {"kind", "command"},
          {"max_restarts", 1},
          {"resources",
           {{"nodes", 1}, {"ranks_per_node", 1}, {"slot_type", "cpu"}, {"slots_per_rank", 1}}},
          {"command", {"sleep", marker}}};
}

json TwoNodes() {
  return {{"nodes", 2}, {"ranks_per_node", 1}, {"slot_type", "cpu"}, {"slots_per_rank", 1}};
}

TEST_F(MultiNodeNetnsTest, ACommandJobRunsARankOnEachNode) {
  json spec = {{"name", "where"},
               {"kind", "command"},
               {"resources", TwoNodes()},
               {"command", {"sh", "-c", "echo rank $OMPI_COMM_WORLD_RANK at $EMBODY_NODE_ADDRESS"}}};
  int64_t id = Submit(spec);
  ASSERT_GT(id, 0);
  json job = stack_->WaitForState(id, {"SUCCEEDED", "FAILED", "CANCELLED"}, 120);
  ASSERT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump(2) << Logs(id, -1);
  // The other node's rank log reaches the server in that node's next heartbeat, which may come
  // after the head reported the job's end.
  std::string all;
  for (int i = 0; i < 100; ++i) {
    all = Logs(id, 0) + Logs(id, 1);
    if (all.find("at " + g_net->addr_a) != std::string::npos &&
        all.find("at " + g_net->addr_b) != std::string::npos) {
      break;
    }
    ::usleep(100'000);
  }
  EXPECT_NE(all.find("at " + g_net->addr_a), std::string::npos) << all << Logs(id, -1);
  EXPECT_NE(all.find("at " + g_net->addr_b), std::string::npos) << all << Logs(id, -1);
}

TEST_F(MultiNodeNetnsTest, AnEngineJobTrainsAcrossBothNodes) {
  json spec = {{"name", "train-2"},
               {"kind", "train"},
               {"resources", TwoNodes()},
               {"engine",
                {{"optim", {{"steps", 20}, {"lr", 0.004}, {"warmup_steps", 2}}},
                 {"data", {{"rows_per_step", 2}, {"tokens_per_row", 512}}},
                 {"model",
                  {{"d_model", 32}, {"layers", 1}, {"heads", 4}, {"mlp", 64},
                   {"action_horizon", 4}}}}}};
  int64_t id = Submit(spec);
  ASSERT_GT(id, 0);
  json job = stack_->WaitForState(id, {"SUCCEEDED", "FAILED", "CANCELLED"}, 240);
  ASSERT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump(2) << Logs(id, -1) << Logs(id, 1);
  EXPECT_EQ(job["allocation"].size(), 2u);
}

// node-b's rsh endpoint, called as a job (or anyone on the network) might: without the job's
// token, with another job's, or for a job not placed there, nothing starts.
TEST_F(MultiNodeNetnsTest, ForgedDaemonRequestsAreRefused) {
  json spec = {{"name", "long"},
               {"kind", "command"},
               {"resources", TwoNodes()},
               {"command", {"sleep", "60"}}};
  int64_t id = Submit(spec);
  ASSERT_GT(id, 0);
  json job = stack_->WaitForState(id, {"RUNNING"}, 60);
  ASSERT_EQ(job.value("state", ""), "RUNNING") << job.dump(2);
  // The URL of the node that is not the head (the allocation lists the head first), as the
  // server has it: only that node's agent holds a worker assignment for the job.
  ASSERT_EQ(job["allocation"].size(), 2u) << job.dump(2);
  const int64_t worker_id = job["allocation"][1]["node_id"].get<int64_t>();
  HttpResult nodes = stack_->Get("/v1/nodes");
  std::string url_b;
  for (const auto& n : nodes.body["nodes"]) {
    if (n.value("id", int64_t{0}) == worker_id) url_b = n.value("agent_url", "");
  }
  ASSERT_FALSE(url_b.empty()) << nodes.text;
  auto token = stack_->pg().Psql("SELECT job_token FROM job_allocations WHERE job_id = " +
                                 std::to_string(id) + " LIMIT 1");
  ASSERT_TRUE(token.ok());
  std::string tok = *token;
  while (!tok.empty() && (tok.back() == '\n' || tok.back() == ' ')) tok.pop_back();
  ASSERT_FALSE(tok.empty());

  httplib::Client c(url_b);
  c.set_read_timeout(10, 0);
  auto post = [&](int64_t job_id, const std::string& bearer, const json& argv) {
    httplib::Headers h = {{"Authorization", "Bearer " + bearer}};
    auto r = c.Post(("/v1/local/jobs/" + std::to_string(job_id) + "/rsh").c_str(), h,
                    json{{"argv", argv}}.dump(), "application/json");
    return r ? r->status : 0;
  };
  const json orted = {"orted", "-mca", "ess", "env"};
  EXPECT_EQ(post(id, "forged", orted), 401);
  EXPECT_EQ(post(id, std::string(64, 'a'), orted), 401);
  EXPECT_EQ(post(id + 1000, tok, orted), 404);                  // not placed here
  EXPECT_EQ(post(id, tok, json{"/bin/sh", "-c", "id"}), 400);    // the token, not the daemon
  EXPECT_EQ(post(id, tok, json{"orted", ";", "id"}), 400);
  ASSERT_EQ(stack_->Post("/v1/jobs/" + std::to_string(id) + "/cancel", "{}").status, 200);
  job = stack_->WaitForState(id, {"CANCELLED", "FAILED", "SUCCEEDED"}, 60);
  EXPECT_EQ(job.value("state", ""), "CANCELLED") << job.dump(2);
  // Its token is worth nothing once the job has ended.
  EXPECT_EQ(post(id, tok, orted), 404);
}

// Processes whose command line is exactly `sleep <arg>`.
int CountSleeps(const std::string& arg) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "cmdline", std::ios::binary);
    std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (cmd == std::string("sleep\0", 6) + arg + std::string(1, '\0')) ++n;
  }
  return n;
}

// A node cut off from the network while it runs a job (its link taken down inside its namespace,
// the agent and the job left running): the server marks it DOWN and restarts the job on the
// other node. When the link comes back, the node's first heartbeat is told to stop the attempt
// it still runs, so two attempts of one job never run side by side for longer than that; the
// new attempt is left alone.
TEST_F(MultiNodeNetnsTest, APartitionedNodeStopsItsStaleAttemptWhenHeardAgain) {
  const std::string marker = "6" + std::to_string(::getpid() % 100000) + ".25";
  json spec = RestartableSleep("fenced", marker);
  int64_t id = Submit(spec);
  ASSERT_GT(id, 0);
  json job = stack_->WaitForState(id, {"RUNNING"}, 60);
  ASSERT_EQ(job.value("state", ""), "RUNNING") << job.dump(2);
  ASSERT_EQ(job["allocation"].size(), 1u) << job.dump(2);
  const int64_t first_node = job["allocation"][0]["node_id"].get<int64_t>();
  const std::string first_name = job["allocation"][0].value("node", "");
  ASSERT_TRUE(first_name == "node-a" || first_name == "node-b") << job.dump(2);
  const int cut = first_name == "node-a" ? 0 : 1;
  const std::string ns = cut == 0 ? g_net->ns_a : g_net->ns_b;
  const std::string link = cut == 0 ? g_net->link_a : g_net->link_b;
  for (int i = 0; i < 200 && CountSleeps(marker) < 1; ++i) ::usleep(50'000);
  ASSERT_EQ(CountSleeps(marker), 1) << Logs(id, -1);

  ASSERT_EQ(Sh("ip -n " + ns + " link set " + link + " down"), 0);
  // Restarted on the other node while the cut-off one still runs the first attempt.
  bool moved = false;
  for (int i = 0; i < 600 && !moved; ++i) {
    job = stack_->Get("/v1/jobs/" + std::to_string(id)).body;
    moved = job.value("state", "") == "RUNNING" && job.value("attempt", 0) == 1 &&
            job["allocation"].size() == 1 &&
            job["allocation"][0]["node_id"].get<int64_t>() != first_node;
    if (!moved) ::usleep(100'000);
  }
  const bool healed = Sh("ip -n " + ns + " link set " + link + " up") == 0;
  ASSERT_TRUE(moved) << job.dump(2);
  ASSERT_TRUE(healed);
  for (int i = 0; i < 200 && CountSleeps(marker) < 2; ++i) ::usleep(50'000);
  ASSERT_EQ(CountSleeps(marker), 2) << "the new attempt did not start beside the stale one";

  // Heard again: the stale attempt stops, the new one runs on.
  const std::string stale_env = "EMBODY_CHECKPOINT_DIR=" + stack_->agent_data_dir(cut) + "/";
  for (int i = 0; i < 300 && !ProcessesWith(stale_env).empty(); ++i) ::usleep(100'000);
  EXPECT_TRUE(ProcessesWith(stale_env).empty()) << "the stale attempt still runs on " << first_name;
  EXPECT_EQ(CountSleeps(marker), 1);
  job = stack_->Get("/v1/jobs/" + std::to_string(id)).body;
  EXPECT_EQ(job.value("state", ""), "RUNNING") << job.dump(2);
  EXPECT_EQ(job.value("attempt", 0), 1) << job.dump(2);
  ASSERT_EQ(stack_->Post("/v1/jobs/" + std::to_string(id) + "/cancel", "").status, 200);
  job = stack_->WaitForState(id, {"CANCELLED", "FAILED", "SUCCEEDED"}, 60);
  EXPECT_EQ(job.value("state", ""), "CANCELLED") << job.dump(2);
  for (int i = 0; i < 100 && CountSleeps(marker) > 0; ++i) ::usleep(50'000);
  EXPECT_EQ(CountSleeps(marker), 0);
}

// The same cut, with the other node drained: the requeued job can only go back to the node that
// still runs its first attempt. Heard again, that node is told to stop the old attempt; its end
// (reported with its attempt) does not end the new one, which then starts there.
TEST_F(MultiNodeNetnsTest, AJobPlacedBackOnThePartitionedNodeReplacesItsStaleAttempt) {
  const std::string marker = "5" + std::to_string(::getpid() % 100000) + ".75";
  HttpResult nodes = stack_->Get("/v1/nodes");
  int64_t a_id = 0, b_id = 0;
  for (const auto& n : nodes.body["nodes"]) {
    if (n.value("name", "") == "node-a") a_id = n.value("id", int64_t{0});
    if (n.value("name", "") == "node-b") b_id = n.value("id", int64_t{0});
  }
  ASSERT_TRUE(a_id > 0 && b_id > 0) << nodes.text;
  ASSERT_EQ(stack_->Post("/v1/nodes/" + std::to_string(a_id) + "/drain", "").status, 200);
  // node-a comes back however this test ends: the suite's later jobs need both nodes.
  struct Undrain {
    int64_t node;
    ~Undrain() { stack_->Post("/v1/nodes/" + std::to_string(node) + "/undrain", ""); }
  } undrain{a_id};
  json spec = RestartableSleep("placed-back", marker);
  int64_t id = Submit(spec);
  ASSERT_GT(id, 0);
  json job = stack_->WaitForState(id, {"RUNNING"}, 60);
  ASSERT_EQ(job.value("state", ""), "RUNNING") << job.dump(2);
  ASSERT_EQ(job["allocation"][0].value("node", ""), "node-b") << job.dump(2);
  for (int i = 0; i < 200 && CountSleeps(marker) < 1; ++i) ::usleep(50'000);
  ASSERT_EQ(CountSleeps(marker), 1);

  const std::string link = g_net->link_b;
  ASSERT_EQ(Sh("ip -n " + g_net->ns_b + " link set " + link + " down"), 0);
  bool requeued = false;
  for (int i = 0; i < 600 && !requeued; ++i) {
    job = stack_->Get("/v1/jobs/" + std::to_string(id)).body;
    requeued = job.value("attempt", 0) == 1 && job.value("state", "") == "PENDING";
    if (!requeued) ::usleep(100'000);
  }
  const bool healed = Sh("ip -n " + g_net->ns_b + " link set " + link + " up") == 0;
  EXPECT_TRUE(requeued) << job.dump(2);
  ASSERT_TRUE(healed);
  EXPECT_EQ(CountSleeps(marker), 1) << "the first attempt stopped while its node was cut off";

  // Back on node-b: the new attempt runs, alone.
  bool replaced = false;
  for (int i = 0; i < 300 && !replaced; ++i) {
    job = stack_->Get("/v1/jobs/" + std::to_string(id)).body;
    replaced = job.value("state", "") == "RUNNING" && job.value("attempt", 0) == 1;
    if (!replaced) ::usleep(100'000);
  }
  EXPECT_TRUE(replaced) << job.dump(2) << Logs(id, -1);
  for (int i = 0; i < 100 && CountSleeps(marker) != 1; ++i) ::usleep(50'000);
  EXPECT_EQ(CountSleeps(marker), 1);
  EXPECT_EQ(job["allocation"][0].value("node", ""), "node-b") << job.dump(2);

  ASSERT_EQ(stack_->Post("/v1/jobs/" + std::to_string(id) + "/cancel", "").status, 200);
  job = stack_->WaitForState(id, {"CANCELLED", "FAILED", "SUCCEEDED"}, 60);
  EXPECT_EQ(job.value("state", ""), "CANCELLED") << job.dump(2);
  for (int i = 0; i < 100 && CountSleeps(marker) > 0; ++i) ::usleep(50'000);
  EXPECT_EQ(CountSleeps(marker), 0);
}

// A user's own PyTorch script as a command job on both nodes, written as for torchrun: it finds its
// peers through the env:// rendezvous the agents give every rank (MASTER_ADDR, MASTER_PORT, RANK,
// WORLD_SIZE, LOCAL_RANK, NODE_RANK), all-reduces over gloo across the namespaces, and reports a
// step through the SDK the agent puts on its PYTHONPATH. Skipped where Debian's python3-torch is
// not installed.
TEST_F(MultiNodeNetnsTest, APyTorchDdpScriptFindsItsPeersAndReports) {
  if (Sh("/usr/bin/python3 -c \"import torch.distributed\"") != 0) {
    GTEST_SKIP() << "no torch for /usr/bin/python3 (Debian package python3-torch)";
  }
  const std::string script =
      "import os, torch, torch.distributed as dist, embody\n"
      "dist.init_process_group('gloo', init_method='env://')\n"
      "t = torch.tensor([float(dist.get_rank() + 1)])\n"
      "dist.all_reduce(t)\n"
      "print('rank', os.environ['RANK'], 'of', os.environ['WORLD_SIZE'], 'node',\n"
      "      os.environ['NODE_RANK'], 'local', os.environ['LOCAL_RANK'], 'sum', t.item(),\n"
      "      flush=True)\n"
      "embody.report(step=1, loss=t.item())\n"
      "embody.flush()\n"
      "dist.destroy_process_group()\n";
  json spec = {{"name", "ddp"},
               {"kind", "command"},
               {"resources", TwoNodes()},
               {"command", {"/usr/bin/python3", "-c", script}}};
  int64_t id = Submit(spec);
  ASSERT_GT(id, 0);
  json job = stack_->WaitForState(id, {"SUCCEEDED", "FAILED", "CANCELLED"}, 180);
  ASSERT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump(2) << Logs(id, -1) << Logs(id, 0)
                                                 << Logs(id, 1);
  std::string all;
  for (int i = 0; i < 100; ++i) {
    all = Logs(id, 0) + Logs(id, 1);
    if (all.find("rank 0 of 2 node 0 local 0 sum 3.0") != std::string::npos &&
        all.find("rank 1 of 2 node 1 local 0 sum 3.0") != std::string::npos) {
      break;
    }
    ::usleep(100'000);
  }
  EXPECT_NE(all.find("rank 0 of 2 node 0 local 0 sum 3.0"), std::string::npos) << all;
  EXPECT_NE(all.find("rank 1 of 2 node 1 local 0 sum 3.0"), std::string::npos) << all;
  // The step rank 0 reported through the SDK is the job's, as an engine's would be.
  json step;
  for (int i = 0; i < 100; ++i) {
    step = stack_->Get("/v1/jobs/" + std::to_string(id)).body.value("last_step", json());
    if (step.is_object()) break;
    ::usleep(100'000);
  }
  ASSERT_TRUE(step.is_object()) << stack_->Get("/v1/jobs/" + std::to_string(id)).text;
  EXPECT_EQ(step.value("step", 0), 1) << step.dump();
  EXPECT_EQ(step.value("loss", 0.0), 3.0) << step.dump();
}

// examples/pytorch/train_bc.py as its README submits it (shorter), on a dataset imported through
// the API and bound with "datasets": 2 nodes x 1 rank, once with Embody's launcher and once with
// "launcher": "torchrun" (one torchrun per node). Both ranks say which part of the data they
// train on, rank 0 reports its steps through the SDK and prints the final loss.
TEST_F(MultiNodeNetnsTest, TheExampleTrainsOnAnImportedDatasetAcrossBothNodes) {
  if (Sh("/usr/bin/python3 -c \"import torch.distributed\"") != 0) {
    GTEST_SKIP() << "no torch for /usr/bin/python3 (Debian package python3-torch)";
  }
  storage::testing::RobomimicFileSpec file;
  file.demos = 8;
  file.frames = 40;
  file.cameras = 0;
  json d = ImportRobomimicThroughApi(*stack_, "lift", file);
  ASSERT_EQ(d.value("state", ""), "ready") << d.dump(2);

  constexpr int kSteps = 60;
  const std::string example = std::string(EMBODY_SOURCE_DIR) + "/examples/pytorch/train_bc.py";
  const std::vector<std::string> args = {"--dataset",    "dataset:lift", "--steps",
                                         std::to_string(kSteps), "--batch-size", "8",
                                         "--checkpoint-every", "0", "--log-every", "20"};
  for (const std::string launcher : {"mpirun", "torchrun"}) {
    SCOPED_TRACE(launcher);
    json command = json::array();
    if (launcher == "mpirun") command.push_back("/usr/bin/python3");
    command.push_back(example);
    for (const auto& a : args) command.push_back(a);
    json spec = {{"name", "bc-" + launcher},
                 {"kind", "command"},
                 {"resources", TwoNodes()},
                 {"datasets", {"dataset:lift"}},
                 {"command", command}};
    if (launcher == "torchrun") spec["launcher"] = "torchrun";
    const int64_t id = Submit(spec);
    ASSERT_GT(id, 0);
    json job = stack_->WaitForState(id, {"SUCCEEDED", "FAILED", "CANCELLED"}, 300);
    ASSERT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump(2) << Logs(id, -1) << Logs(id, 0)
                                                   << Logs(id, 1);
    // Each node's log (the other node's arrives with its next heartbeat).
    std::string log0, log1;
    for (int i = 0; i < 100; ++i) {
      log0 = Logs(id, 0);
      log1 = Logs(id, 1);
      if (log0.find("rank 0 of 2:") != std::string::npos &&
          log1.find("rank 1 of 2:") != std::string::npos) {
        break;
      }
      ::usleep(100'000);
    }
    EXPECT_NE(log0.find("rank 0 of 2: 160 samples per epoch"), std::string::npos) << log0;
    EXPECT_NE(log1.find("rank 1 of 2: 160 samples per epoch"), std::string::npos) << log1;
    EXPECT_NE(log0.find("done: step " + std::to_string(kSteps - 1) + " loss "), std::string::npos)
        << log0;
    json step;
    for (int i = 0; i < 100; ++i) {
      step = stack_->Get("/v1/jobs/" + std::to_string(id)).body.value("last_step", json());
      if (step.is_object() && step.value("step", 0) == kSteps - 1) break;
      ::usleep(100'000);
    }
    ASSERT_TRUE(step.is_object()) << stack_->Get("/v1/jobs/" + std::to_string(id)).text;
    EXPECT_EQ(step.value("step", 0), kSteps - 1) << step.dump();
    EXPECT_GT(step.value("loss", 0.0), 0.0) << step.dump();
  }
}

// node-b's agent killed mid-job (the head's stays): the job's daemon and ranks there, and a
// process a rank started in a session of its own (out of the daemon's tree), are stopped by
// their watcher after the agent's orphan grace; nothing of the job keeps running outside any
// agent's control. Last in the suite: it restarts node-b's agent at the end.
TEST_F(MultiNodeNetnsTest, AWorkerAgentKilledLeavesNothingOfTheJobRunning) {
  const std::string escaped = "7" + std::to_string(::getpid() % 100000) + ".5";
  json spec = {{"name", "orphans"},
               {"kind", "command"},
               {"resources", TwoNodes()},
               {"command",
                {"sh", "-c",
                 "setsid sleep " + escaped + " </dev/null >/dev/null 2>&1 & exec sleep 600"}}};
  int64_t id = Submit(spec);
  ASSERT_GT(id, 0);
  json job = stack_->WaitForState(id, {"RUNNING"}, 60);
  ASSERT_EQ(job.value("state", ""), "RUNNING") << job.dump(2);
  // Both ranks have started their escaped process.
  for (int i = 0; i < 200 && CountSleeps(escaped) < 2; ++i) ::usleep(50'000);
  ASSERT_EQ(CountSleeps(escaped), 2) << Logs(id, -1);
  stack_->KillAgent(1);
  // The agent's orphan grace (3 s), SIGTERM, and some slack for a loaded machine.
  for (int i = 0; i < 300 && CountSleeps(escaped) > 0; ++i) ::usleep(100'000);
  EXPECT_EQ(CountSleeps(escaped), 0) << "a rank's process outlived its node's agent";
  job = stack_->WaitForState(id, {"FAILED", "SUCCEEDED", "CANCELLED"}, 60);
  EXPECT_EQ(job.value("state", ""), "FAILED") << job.dump(2);
  ASSERT_TRUE(stack_->RestartAgent(1));
}

}  // namespace
}  // namespace embody_test
