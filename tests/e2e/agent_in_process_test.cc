// An agent::Agent run inside the test process against an in-process embody-server on a private
// PostgreSQL: it registers, runs `command` jobs through the real mpirun, and Stop ends every
// thread it started and every process of its jobs, promptly, a second Stop doing nothing. The
// ranks and the job watchers run the embody-agent binary (AgentOptions::agent_binary), since
// this process is not one.
#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include <httplib.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/agent.h"
#include "agent/agent_flags.h"
#include "agent/testing/test_util.h"
#include "controlplane/flags.h"
#include "controlplane/server.h"
#include "tests/e2e/local_stack.h"
#include "tests/support/pg_harness.h"

namespace embody_test {
namespace {

using json = nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

class AgentInProcessTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/embody-agent-inproc-XXXXXX";
    dir_ = new std::string(::mkdtemp(tmpl));
    // Job uids pass through the agent's data directory: every ancestor searchable by others.
    std::filesystem::permissions(*dir_, std::filesystem::perms::owner_all |
                                            std::filesystem::perms::group_exec |
                                            std::filesystem::perms::others_exec);
    pg_ = new embody::testing::PgCluster;
    ASSERT_TRUE(pg_->Start().ok());
    controlplane::ServerOptions so;
    so.db = pg_->conninfo();
    so.data_dir = *dir_ + "/server";
    so.bootstrap_out = *dir_ + "/bootstrap.json";
    so.heartbeat_interval_ms = 300;
    so.scheduler_period_ms = 100;
    auto server = controlplane::Server::Start(so);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = server->release();
    // One authenticated request served: the server's accept pool, created once its listener
    // runs, exists by then, so its threads are in every test's "threads before" count.
    ASSERT_EQ(Call("GET", "/v1/nodes").value("http_status", 0), 200);
  }
  static void TearDownTestSuite() {
    if (server_ != nullptr) server_->Stop();
    delete server_;
    delete pg_;
    std::error_code ec;
    std::filesystem::remove_all(*dir_, ec);
    delete dir_;
  }

  agent::AgentOptions Options(const std::string& name) const {
    agent::AgentOptions o;
    o.server = "http://127.0.0.1:" + std::to_string(server_->port());
    o.token = server_->bootstrap().agent_token;
    o.name = name;
    o.data_dir = *dir_ + "/" + name;
    o.slots = 1;
    o.agent_binary = LocalStack::bin_dir() + "/embody-agent";
    o.engine = LocalStack::bin_dir() + "/embody-engine";
    o.kill_grace = milliseconds(1000);
    // Job uids of this test's own, apart from the stacks' (tests/e2e/local_stack.cc).
    o.job_uid_base = 6000000 + (::getpid() % 5000) * 100;
    o.job_uid_count = 100;
    return o;
  }

  static json Call(const std::string& method, const std::string& path, const json& body = {}) {
    httplib::Client cli("127.0.0.1", server_->port());
    cli.set_read_timeout(10, 0);
    const httplib::Headers h{{"Authorization", "Bearer " + server_->bootstrap().admin_token}};
    auto r = method == "POST" ? cli.Post(path.c_str(), h, body.dump(), "application/json")
                              : cli.Get(path.c_str(), h);
    if (!r) return json{{"http_status", 0}};
    json out = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
    if (!out.is_object()) out = json{{"text", r->body}};
    out["http_status"] = r->status;
    return out;
  }

  static int64_t Submit(const std::string& name, const json& command) {
    json spec = {{"name", name},
                 {"kind", "command"},
                 {"resources", {{"nodes", 1}, {"ranks_per_node", 1}}},
                 {"command", command}};
    json r = Call("POST", "/v1/jobs", spec);
    EXPECT_EQ(r.value("http_status", 0), 201) << r.dump();
    return r.value("id", int64_t{0});
  }

  static std::string WaitForState(int64_t id, const std::vector<std::string>& states,
                                  double timeout_s) {
    const auto end = steady_clock::now() + milliseconds(static_cast<int64_t>(timeout_s * 1000));
    std::string state;
    do {
      state = Call("GET", "/v1/jobs/" + std::to_string(id)).value("state", "");
      for (const auto& s : states) {
        if (state == s) return state;
      }
      std::this_thread::sleep_for(milliseconds(100));
    } while (steady_clock::now() < end);
    return state;
  }

  static bool WaitRegistered(const agent::Agent& a, double timeout_s) {
    const auto end = steady_clock::now() + milliseconds(static_cast<int64_t>(timeout_s * 1000));
    while (a.node_id() == 0 && steady_clock::now() < end) {
      std::this_thread::sleep_for(milliseconds(50));
    }
    return a.node_id() != 0;
  }

  // Waits until no node but `mine` is UP (an agent stopped by an earlier test stays UP until it
  // has been silent for 3 heartbeat intervals, and could be given a job meanwhile).
  static bool WaitOthersDown(int64_t mine, double timeout_s) {
    const auto end = steady_clock::now() + milliseconds(static_cast<int64_t>(timeout_s * 1000));
    do {
      bool others_up = false;
      json list = Call("GET", "/v1/nodes");
      for (const json& n : list.value("nodes", json::array())) {
        others_up |= n.value("id", int64_t{0}) != mine && n.value("state", "") == "UP";
      }
      if (!others_up) return true;
      std::this_thread::sleep_for(milliseconds(100));
    } while (steady_clock::now() < end);
    return false;
  }

  static std::string* dir_;
  static embody::testing::PgCluster* pg_;
  static controlplane::Server* server_;
};

std::string* AgentInProcessTest::dir_ = nullptr;
embody::testing::PgCluster* AgentInProcessTest::pg_ = nullptr;
controlplane::Server* AgentInProcessTest::server_ = nullptr;

TEST_F(AgentInProcessTest, RegistersRunsACommandJobAndStopsEveryThread) {
  const int threads_before = agent::ThreadCount();
  auto created = agent::Agent::Create(Options("node-inproc"));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  std::unique_ptr<agent::Agent> a = std::move(*created);
  EXPECT_EQ(a->local_api_port(), 0);
  ASSERT_TRUE(a->Start().ok());
  EXPECT_GT(a->local_api_port(), 0);
  EXPECT_FALSE(a->Start().ok()) << "a second Start must be refused";
  ASSERT_TRUE(WaitRegistered(*a, 20)) << "the agent never registered";
  EXPECT_GT(agent::ThreadCount(), threads_before);

  json node;
  const json nodes = Call("GET", "/v1/nodes");
  for (const json& n : nodes.value("nodes", json::array())) {
    if (n.value("id", int64_t{0}) == a->node_id()) node = n;
  }
  EXPECT_EQ(node.value("name", ""), "node-inproc") << nodes.dump(2);
  EXPECT_EQ(node.value("state", ""), "UP") << nodes.dump(2);
  EXPECT_EQ(node.value("agent_url", ""), a->local_api_url()) << nodes.dump(2);

  const std::string marker = "inproc-" + std::to_string(::getpid());
  const int64_t id = Submit("inproc-hello", {"sh", "-c", "echo " + marker});
  ASSERT_GT(id, 0);
  EXPECT_EQ(WaitForState(id, {"SUCCEEDED", "FAILED", "CANCELLED"}, 60), "SUCCEEDED")
      << Call("GET", "/v1/jobs/" + std::to_string(id)).dump(2);
  // What the job printed came back through this agent's heartbeats.
  httplib::Client cli("127.0.0.1", server_->port());
  auto logs = cli.Get(("/v1/jobs/" + std::to_string(id) + "/logs?rank=0").c_str(),
                      {{"Authorization", "Bearer " + server_->bootstrap().admin_token}});
  ASSERT_TRUE(logs);
  EXPECT_NE(logs->body.find(marker), std::string::npos) << logs->body;

  const auto t0 = steady_clock::now();
  a->Stop();
  const auto stop_ms = std::chrono::duration_cast<milliseconds>(steady_clock::now() - t0).count();
  EXPECT_LT(stop_ms, 3000) << "Stop took " << stop_ms << " ms";
  EXPECT_EQ(agent::ThreadCountSettlingAt(threads_before), threads_before)
      << "threads left after Stop";
  EXPECT_TRUE(a->RunningJobs().empty());

  const auto t1 = steady_clock::now();
  a->Stop();  // a no-op
  EXPECT_LT(std::chrono::duration_cast<milliseconds>(steady_clock::now() - t1).count(), 100);
  EXPECT_EQ(agent::ThreadCount(), threads_before);
  EXPECT_FALSE(a->Start().ok()) << "a stopped agent does not start again";
  a.reset();
  EXPECT_EQ(agent::ThreadCount(), threads_before);
}

TEST_F(AgentInProcessTest, StopKillsTheRunningJobAndReportsIt) {
  const int threads_before = agent::ThreadCount();
  auto created = agent::Agent::Create(Options("node-inproc-stop"));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  std::unique_ptr<agent::Agent> a = std::move(*created);
  ASSERT_TRUE(a->Start().ok());
  ASSERT_TRUE(WaitRegistered(*a, 20));
  ASSERT_TRUE(WaitOthersDown(a->node_id(), 10)) << Call("GET", "/v1/nodes").dump(2);
  const std::string marker = "inproc-stop-" + std::to_string(::getpid());
  const int64_t id = Submit("inproc-sleep", {"sh", "-c", "echo " + marker + "; sleep 600"});
  ASSERT_GT(id, 0);
  ASSERT_EQ(WaitForState(id, {"RUNNING"}, 60), "RUNNING");
  for (int i = 0; i < 100 && ProcessesWith(marker).empty(); ++i) {
    std::this_thread::sleep_for(milliseconds(100));
  }
  ASSERT_FALSE(ProcessesWith(marker).empty()) << "the job never started";
  EXPECT_EQ(a->RunningJobs(), std::vector<int64_t>{id});

  const auto t0 = steady_clock::now();
  a->Stop();
  const auto stop_ms = std::chrono::duration_cast<milliseconds>(steady_clock::now() - t0).count();
  // The job's tree gets SIGTERM, then SIGKILL after the 1 s grace; then one last heartbeat.
  EXPECT_LT(stop_ms, 5000) << "Stop took " << stop_ms << " ms";
  EXPECT_TRUE(ProcessesWith(marker).empty()) << "the job's processes outlived Stop";
  EXPECT_EQ(agent::ThreadCountSettlingAt(threads_before), threads_before);
  // The last heartbeat reported the job's end: the server does not wait for the node to go DOWN.
  EXPECT_EQ(WaitForState(id, {"SUCCEEDED", "FAILED", "CANCELLED", "PENDING", "RESTARTING"}, 10),
            "FAILED")
      << Call("GET", "/v1/jobs/" + std::to_string(id)).dump(2);
}

}  // namespace
}  // namespace embody_test
