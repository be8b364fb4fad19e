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
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>

#include "agent/testing/oci_image.h"
#include "common/file_util.h"
#include "storage/testing/robomimic_file.h"
#include "tests/e2e/local_stack.h"
#include "tests/e2e/stack_datasets.h"
#include "tests/e2e/stack_images.h"
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
  // The worker's assignment reaches its agent with that agent's next heartbeat, which may come
  // after the head reported RUNNING: until then it knows no such job (404).
  for (int i = 0; i < 100 && post(id, "forged", orted) == 404; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
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
  // Both attempts run before the link heals: healed first, the cut-off agent may stop the stale
  // one before the new one's process has started, and the two are never seen side by side.
  for (int i = 0; i < 200 && moved && CountSleeps(marker) < 2; ++i) ::usleep(50'000);
  const int side_by_side = CountSleeps(marker);
  const bool healed = Sh("ip -n " + ns + " link set " + link + " up") == 0;
  ASSERT_TRUE(moved) << job.dump(2);
  ASSERT_TRUE(healed);
  ASSERT_EQ(side_by_side, 2) << "the new attempt did not start beside the stale one";

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

// A job on both nodes whose every rank sleeps `marker` seconds, cancelled by a user or by its
// time limit: the rank on the node that is not the head stops too, even one that ignores
// SIGTERM (the agent SIGKILLs it after its grace period).
TEST_F(MultiNodeNetnsTest, CancelAndTimeLimitStopEveryRankOnBothNodes) {
  for (const std::string how : {"cancel", "time limit"}) {
    SCOPED_TRACE(how);
    const std::string marker =
        (how == "cancel" ? "8" : "9") + std::to_string(::getpid() % 100000) + ".5";
    json spec = {{"name", how == "cancel" ? "cancelled" : "limited"},
                 {"kind", "command"},
                 {"resources", TwoNodes()},
                 {"command", {"sh", "-c", "trap '' TERM; exec sleep " + marker}}};
    if (how == "time limit") spec["time_limit_seconds"] = 3;
    const int64_t id = Submit(spec);
    ASSERT_GT(id, 0);
    json job = stack_->WaitForState(id, {"RUNNING"}, 60);
    ASSERT_EQ(job.value("state", ""), "RUNNING") << job.dump(2);
    for (int i = 0; i < 200 && CountSleeps(marker) < 2; ++i) ::usleep(50'000);
    ASSERT_EQ(CountSleeps(marker), 2) << "not a rank on each node\n" << Logs(id, -1);
    if (how == "cancel") {
      ASSERT_EQ(stack_->Post("/v1/jobs/" + std::to_string(id) + "/cancel", "").status, 200);
    }
    job = stack_->WaitForState(id, {"CANCELLED", "FAILED", "SUCCEEDED"}, 60);
    EXPECT_EQ(job.value("state", ""), "CANCELLED") << job.dump(2);
    if (how == "time limit") {
      const std::string states =
          stack_->Get("/v1/jobs/" + std::to_string(id) + "/events?type=state&limit=100").text;
      EXPECT_NE(states.find("time limit 3 s reached"), std::string::npos) << states;
    }
    // The agents' kill grace (5 s) and slack for a loaded machine.
    for (int i = 0; i < 300 && CountSleeps(marker) > 0; ++i) ::usleep(100'000);
    EXPECT_EQ(CountSleeps(marker), 0) << "a rank outlived its job";
  }
}

// The python3 processes running `script` of the job's first attempt (started without
// EMBODY_RESUME_FROM).
std::vector<int> FirstAttemptRanks(const std::string& script) {
  std::vector<int> out;
  for (int pid : ProcessesWith(script)) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
    std::string env((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ifstream cmd_in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
    std::string cmd((std::istreambuf_iterator<char>(cmd_in)), std::istreambuf_iterator<char>());
    if (cmd.find("python3") == 0 || cmd.find("/usr/bin/python3") == 0) {
      if (env.find("EMBODY_RESUME_FROM=") == std::string::npos) out.push_back(pid);
    }
  }
  return out;
}

// A PyTorch command job on both nodes, written with the SDK as docs/byo.md shows: it resumes
// from embody.resume_path(), checkpoints through embody.checkpoint_file() every 5 steps and
// reports each step. Its first attempt holds (both ranks idle, out of any collective) once its
// checkpoint of step 14 is written; the test waits until the server holds that upload, then the
// node that is not the head is lost (its agent and every process of its jobs SIGKILLed). The
// server declares the node down and requeues the job; the surviving node stops the first
// attempt's rank, which would otherwise sleep on forever; the lost node comes back, and the next
// attempt, on both nodes again, starts at step 15 and runs to the end.
TEST_F(MultiNodeNetnsTest, ANodeLostUnderAPyTorchJobRestartsItFromItsLastCheckpoint) {
  if (Sh("/usr/bin/python3 -c \"import torch.distributed\"") != 0) {
    GTEST_SKIP() << "no torch for /usr/bin/python3 (Debian package python3-torch)";
  }
  const std::string script = stack_->dir() + "/resumes_" + std::to_string(::getpid()) + ".py";
  {
    std::ofstream f(script);
    f << "import os, sys, time, torch, torch.distributed as dist, embody\n"
         "dist.init_process_group('gloo', init_method='env://')\n"
         "rank = dist.get_rank()\n"
         "start = torch.tensor([0])\n"
         "if rank == 0 and (path := embody.resume_path()) is not None:\n"
         "    start[0] = int(open(path).read()) + 1\n"
         "dist.broadcast(start, 0)\n"
         "start = int(start[0])\n"
         "print(f'rank {rank} starts at step {start}', flush=True)\n"
         "for step in range(start, 30):\n"
         "    t = torch.tensor([float(step)])\n"
         "    dist.all_reduce(t)\n"
         "    if rank == 0:\n"
         "        embody.report(step=step, loss=t.item())\n"
         "        if step % 5 == 4:\n"
         "            with embody.checkpoint_file(step) as p:\n"
         "                open(p, 'w').write(str(step))\n"
         "    if step == 14 and 'EMBODY_RESUME_FROM' not in os.environ:\n"
         "        print(f'rank {rank} holds', flush=True)\n"
         "        while True:\n"
         "            time.sleep(0.1)\n"
         "    time.sleep(0.05)\n"
         "print(f'rank {rank} done', flush=True)\n";
  }
  std::filesystem::permissions(script, std::filesystem::perms::owner_read |
                                           std::filesystem::perms::owner_write |
                                           std::filesystem::perms::group_read |
                                           std::filesystem::perms::others_read);
  json spec = {{"name", "resumes"},
               {"kind", "command"},
               {"max_restarts", 1},
               {"resources", TwoNodes()},
               {"command", {"/usr/bin/python3", script}}};
  const int64_t id = Submit(spec);
  ASSERT_GT(id, 0);
  const std::string path = "/v1/jobs/" + std::to_string(id);
  // Held after step 14, with that checkpoint in the server's blob store.
  json job;
  bool uploaded = false;
  for (int i = 0; i < 1200 && !uploaded; ++i) {
    job = stack_->Get(path).body;
    if (job.value("state", "") != "RUNNING" && job.value("state", "") != "SCHEDULED" &&
        job.value("state", "") != "PENDING") {
      break;
    }
    for (const auto& c : stack_->Get(path + "/checkpoints").body.value("checkpoints", json::array())) {
      if (c.value("step", -1) == 14) uploaded = true;
    }
    if (!uploaded) ::usleep(100'000);
  }
  ASSERT_TRUE(uploaded) << job.dump(2) << Logs(id, -1) << Logs(id, 0) << Logs(id, 1);
  ASSERT_EQ(job["allocation"].size(), 2u) << job.dump(2);
  const std::string head = job["allocation"][0].value("node", "");
  const std::string worker = job["allocation"][1].value("node", "");
  ASSERT_TRUE(worker == "node-a" || worker == "node-b") << job.dump(2);
  const int lost = worker == "node-a" ? 0 : 1;
  for (int i = 0; i < 200 && FirstAttemptRanks(script).size() < 2; ++i) ::usleep(50'000);
  ASSERT_EQ(FirstAttemptRanks(script).size(), 2u) << "not a rank on each node";

  stack_->LoseNode(lost);
  // The lost node comes back however this test ends: the suite's later jobs need both nodes.
  struct Restart {
    int node;
    bool done = false;
    ~Restart() {
      if (!done) stack_->RestartAgent(node);
    }
  } restart{lost};
  bool requeued = false;
  for (int i = 0; i < 600 && !requeued; ++i) {
    job = stack_->Get(path).body;
    requeued = job.value("attempt", 0) == 1 && job.value("state", "") == "PENDING";
    if (!requeued && job.value("state", "") != "RUNNING" && job.value("state", "") != "RESTARTING") {
      break;
    }
    if (!requeued) ::usleep(100'000);
  }
  ASSERT_TRUE(requeued) << job.dump(2) << Logs(id, -1) << Logs(id, 0);
  // The first attempt's rank on the surviving node, which would sleep on forever, is stopped:
  // its kill grace (5 s) and slack for a loaded machine.
  std::vector<int> left;
  for (int i = 0; i < 300 && !(left = FirstAttemptRanks(script)).empty(); ++i) ::usleep(100'000);
  EXPECT_TRUE(left.empty()) << "the first attempt's rank still runs on " << head;

  restart.done = true;
  ASSERT_TRUE(stack_->RestartAgent(lost));
  job = stack_->WaitForState(id, {"SUCCEEDED", "FAILED", "CANCELLED"}, 240);
  ASSERT_EQ(job.value("state", ""), "SUCCEEDED")
      << job.dump(2) << Logs(id, -1) << Logs(id, 0) << Logs(id, 1);
  EXPECT_EQ(job.value("attempt", 0), 1) << job.dump(2);
  // The first step stored after the requeue is the next attempt's: the one after the upload.
  int64_t requeue_event = -1;
  const json states = stack_->Get(path + "/events?type=state&limit=100").body["events"];
  for (const auto& e : states) {
    if (e["data"]["to"] == "PENDING" && e["data"]["from"] == "RESTARTING") requeue_event = e["id"];
  }
  ASSERT_GT(requeue_event, 0) << states.dump(2);
  json after = stack_->Get(path + "/events?type=step&limit=1&after=" +
                           std::to_string(requeue_event)).body["events"];
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0]["data"]["step"], 15) << "the next attempt did not resume from step 14's";
  std::string log;
  for (int i = 0; i < 100; ++i) {
    log = Logs(id, 0) + Logs(id, 1);
    if (log.find("rank 1 done") != std::string::npos) break;
    ::usleep(100'000);
  }
  EXPECT_NE(log.find("rank 0 starts at step 15"), std::string::npos) << log;
  EXPECT_NE(log.find("rank 1 starts at step 15"), std::string::npos) << log;
  EXPECT_NE(log.find("rank 0 done"), std::string::npos) << log;
  EXPECT_NE(log.find("rank 1 done"), std::string::npos) << log;
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

// A two-node command job in an OCI image (docs/byo.md "Environments"): each agent unpacks the
// image into its own cache before mpirun starts (the head asks the other node's agent), and each
// rank, one per node, runs inside it: it sees the image's files and not the host's, and the
// rendezvous variables of a two-rank world.
TEST_F(MultiNodeNetnsTest, ACommandJobRunsInAnImageOnBothNodes) {
  if (!agent::testing::HaveCrunAndUmoci()) {
    GTEST_SKIP() << "crun or umoci not installed (deploy/setup.sh installs both)";
  }
  auto tar = agent::testing::BuildOciImageTar(stack_->dir() + "/image-two-nodes",
                                              {{EMBODY_IMAGE_PROBE, "/bin/probe"}});
  ASSERT_TRUE(tar.ok()) << tar.status().message();
  auto bytes = common::ReadFile(*tar);
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  json image = UploadImageThroughApi(*stack_, "probe-two-nodes", *bytes);
  ASSERT_EQ(image.value("state", ""), "ready") << image.dump(2);

  json spec = {{"name", "in-image-2"},
               {"kind", "command"},
               {"resources", TwoNodes()},
               {"environment", {{"image", "probe-two-nodes"}}},
               {"command", {"/bin/probe", "report", "/bin/probe", "/etc/debian_version"}}};
  int64_t id = Submit(spec);
  ASSERT_GT(id, 0);
  json job = stack_->WaitForState(id, {"SUCCEEDED", "FAILED", "CANCELLED"}, 240);
  ASSERT_EQ(job.value("state", ""), "SUCCEEDED")
      << job.dump(2) << Logs(id, -1) << "\nrank 0:\n" << Logs(id, 0) << "\nrank 1:\n"
      << Logs(id, 1);
  // The other node's rank log reaches the server in its next heartbeat.
  std::string logs[2];
  for (int i = 0; i < 100; ++i) {
    logs[0] = Logs(id, 0);
    logs[1] = Logs(id, 1);
    if (logs[0].find("root_writable=") != std::string::npos &&
        logs[1].find("root_writable=") != std::string::npos) {
      break;
    }
    ::usleep(100'000);
  }
  std::string master[2], node[2];
  for (int rank = 0; rank < 2; ++rank) {
    const std::string& log = logs[rank];
    SCOPED_TRACE("rank " + std::to_string(rank) + ":\n" + log);
    EXPECT_NE(log.find("exists /bin/probe=1"), std::string::npos);          // the image's
    EXPECT_NE(log.find("exists /etc/debian_version=0"), std::string::npos);  // not the host's
    EXPECT_NE(log.find("root_writable=0"), std::string::npos);
    EXPECT_EQ(log.find("uid=0\n"), std::string::npos);
    EXPECT_NE(log.find("RANK=" + std::to_string(rank) + "\n"), std::string::npos);
    EXPECT_NE(log.find("WORLD_SIZE=2\n"), std::string::npos);
    auto value = [&](const std::string& key) {
      const size_t at = log.find("\n" + key + "=");
      if (at == std::string::npos) return std::string();
      const size_t from = at + key.size() + 2;
      return log.substr(from, log.find('\n', from) - from);
    };
    master[rank] = value("MASTER_ADDR");
    node[rank] = value("EMBODY_NODE_ADDRESS");
  }
  // One rendezvous address, the head's, which is one of the two nodes; one rank on each node.
  EXPECT_FALSE(master[0].empty());
  EXPECT_EQ(master[0], master[1]);
  EXPECT_TRUE(master[0] == g_net->addr_a || master[0] == g_net->addr_b) << master[0];
  EXPECT_NE(node[0], node[1]);
  for (const std::string& n : node) {
    EXPECT_TRUE(n == g_net->addr_a || n == g_net->addr_b) << n;
  }
  // Each agent unpacked the image into its own cache (agent/images/image_cache.h).
  for (int i = 0; i < 2; ++i) {
    const std::string cache = stack_->agent_data_dir(i) + "/images";
    int unpacked = 0;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(cache, ec)) {
      unpacked += std::filesystem::exists(e.path() / "rootfs" / "bin" / "probe") ? 1 : 0;
    }
    EXPECT_EQ(unpacked, 1) << cache;
  }
}

}  // namespace
}  // namespace embody_test
