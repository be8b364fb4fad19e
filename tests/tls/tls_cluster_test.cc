// A cluster whose every listener speaks TLS, as real processes: PostgreSQL, embody-server with
// --tls-cert/--tls-key, and agents with certificates of their own and --ca-file, all signed by a
// CA made at test time (tests/support/test_ca.h). Where the test may make network namespaces
// (root and `ip netns`), two agents each run in one of their own, as in
// tests/e2e/multinode_netns_test.cc, so a job on both nodes launches node-b's part through
// node-b's agent: the rsh bridge over TLS (docs/multinode.md). Elsewhere one agent runs on
// loopback and the two-node case is skipped, saying why.
//
// The CA file sits in a directory only root may enter, so agents that run jobs as other uids must
// give their jobs a copy (agent/jobs/job_binaries.h) for the rsh launcher and the ranks' reports.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/http/client.h"
#include "tests/support/pg_harness.h"
#include "tests/support/netns.h"
#include "tests/support/test_ca.h"

namespace {

using embody::testing::ChildProcess;
using nlohmann::json;

using embody::testing::Sh;
// Apart from multinode_netns_test's names and its 10.213 range.
using Netns = embody::testing::TwoNamespaces;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

bool WaitForFile(const std::string& path, double seconds) {
  for (int i = 0; i < seconds * 10; ++i) {
    if (!Trimmed(ReadAll(path)).empty()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

struct Cluster {
  std::unique_ptr<Netns> net;  // null: one agent, on loopback
  std::string no_netns;        // why not
  std::string dir, pki, url, admin_token;
  std::unique_ptr<embody_test::TestCa> ca, stranger;
  embody::testing::PgCluster pg;
  ChildProcess server;
  std::vector<std::unique_ptr<ChildProcess>> agents;

  std::string ca_file() const { return ca->ca_file(); }

  std::unique_ptr<common::http::Client> Client(const std::string& ca_path) const {
    common::http::ClientOptions o;
    o.base_url = url;
    o.bearer_token = admin_token;
    o.ca_file = ca_path;
    o.connect_timeout_s = 3;
    o.read_timeout_s = 10;
    o.write_timeout_s = 10;
    auto c = common::http::Client::Create(o);
    return c.ok() ? std::move(*c) : nullptr;
  }

  // A call with the admin token: the answer's JSON (its text when not JSON), or the Status of a
  // call that got none, as a string; `status` is the answer's HTTP status, 0 without one.
  json Call(const std::string& method, const std::string& path, const std::string& body = "",
            int* status = nullptr) {
    auto client = Client(ca_file());
    if (!client) return "no client";
    common::http::Request r;
    r.method = method;
    r.path = path;
    r.body = body;
    auto res = client->Send(r);
    if (status) *status = res.ok() ? res->status : 0;
    if (!res.ok()) return res.status().ToString();
    json j = json::parse(res->body, nullptr, false);
    return j.is_discarded() ? json(res->body) : j;
  }

  json WaitForState(int64_t id, const std::vector<std::string>& states, double seconds) {
    json job;
    for (int i = 0; i < seconds * 10; ++i) {
      job = Call("GET", "/v1/jobs/" + std::to_string(id));
      const std::string state = job.is_object() ? job.value("state", "") : "";
      for (const auto& s : states) {
        if (state == s) return job;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return job;
  }

  std::string Logs(int64_t id, int rank) {
    json j = Call("GET", "/v1/jobs/" + std::to_string(id) + "/logs?rank=" + std::to_string(rank));
    return j.is_string() ? j.get<std::string>() : j.dump();
  }
};

Cluster* cluster = nullptr;
std::string setup_error;

// Everything up, or `setup_error` saying what did not come up.
std::string StartCluster(Cluster& c) {
  std::string tmpl = "/tmp/embody-tls-cluster-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) return "no temporary directory";
  c.dir = tmpl;
  ::chmod(c.dir.c_str(), 0755);  // job uids pass through to the agents' job directories
  c.pki = c.dir + "/pki";
  std::filesystem::create_directories(c.pki);
  ::chmod(c.pki.c_str(), 0700);
  auto ca = embody_test::TestCa::Create(c.pki, "cluster");
  if (!ca.ok()) return ca.status().ToString();
  c.ca = std::move(*ca);
  auto stranger = embody_test::TestCa::Create(c.pki, "stranger");
  if (!stranger.ok()) return stranger.status().ToString();
  c.stranger = std::move(*stranger);
  // Where each process listens: the server on the bridge and an agent in each namespace, or
  // both on loopback.
  struct Place {
    std::vector<std::string> prefix;  // runs the agent in its namespace
    std::string address;
  };
  std::string server_host = "127.0.0.1";
  std::vector<Place> places = {{{}, "127.0.0.1"}};
  if (::geteuid() != 0) {
    c.no_netns = "needs root to make network namespaces";
  } else if (Sh("ip netns list") != 0) {
    c.no_netns = "`ip netns` is not available";
  } else {
    c.net = std::make_unique<Netns>("emt", 214);
    if (c.net->Up()) {
      server_host = c.net->server;
      places = {{{"ip", "netns", "exec", c.net->ns_a}, c.net->addr_a},
                {{"ip", "netns", "exec", c.net->ns_b}, c.net->addr_b}};
    } else {
      c.net->Down();
      c.net.reset();
      c.no_netns = "cannot make the test's network namespaces here";
    }
  }
  auto server_cert = c.ca->Issue("server", {server_host, "localhost"});
  if (!server_cert.ok()) return "cannot issue a certificate";
  if (common::Status st = c.pg.Start(); !st.ok()) return "PostgreSQL: " + st.ToString();

  const std::string bin = EMBODY_BIN_DIR;
  const std::string port_file = c.dir + "/server.port", bootstrap = c.dir + "/bootstrap.json";
  common::Status st =
      c.server.Start({bin + "/embody-server", "--listen", server_host + ":0", "--db",
                      c.pg.conninfo(), "--data-dir", c.dir + "/server", "--port-file", port_file,
                      "--bootstrap-out", bootstrap, "--heartbeat-interval-ms", "500", "--tls-cert",
                      server_cert->cert_file, "--tls-key", server_cert->key_file},
                     c.dir + "/server.log");
  if (!st.ok() || !WaitForFile(port_file, 30) || !WaitForFile(bootstrap, 10)) {
    return "server did not start:\n" + ReadAll(c.dir + "/server.log");
  }
  c.url = "https://" + server_host + ":" + Trimmed(ReadAll(port_file));
  json b = json::parse(ReadAll(bootstrap), nullptr, false);
  if (!b.is_object() || !b.contains("admin_token")) return "bad bootstrap file";
  c.admin_token = b["admin_token"].get<std::string>();

  const std::string uid_base = std::to_string(200000 + (::getpid() % 5000) * 1000);
  std::string logs;
  for (size_t i = 0; i < places.size(); ++i) {
    const std::string name = std::string("node-") + static_cast<char>('a' + i);
    const Place& place = places[i];
    auto cert = c.ca->Issue(name, {place.address});
    if (!cert.ok()) return "cannot issue a certificate";
    std::vector<std::string> argv = place.prefix;
    argv.insert(argv.end(), {bin + "/embody-agent",
                             "--server",
                             c.url,
                             "--ca-file",
                             c.ca_file(),
                             "--token-file",
                             bootstrap,
                             "--name",
                             name,
                             "--data-dir",
                             c.dir + "/agents/" + name,
                             "--slots",
                             "1",
                             "--address",
                             place.address,
                             "--listen",
                             place.address + ":0",
                             "--tls-cert",
                             cert->cert_file,
                             "--tls-key",
                             cert->key_file,
                             "--job-uid-base",
                             uid_base,
                             "--job-uid-count",
                             "1000"});
    c.agents.push_back(std::make_unique<ChildProcess>());
    const std::string log = c.dir + "/agent-" + name + ".log";
    logs += log + " ";
    st = c.agents.back()->Start(argv, log);
    if (!st.ok()) return "agent " + name + ": " + st.ToString();
  }
  for (int i = 0; i < 300; ++i) {
    json nodes_now = c.Call("GET", "/v1/nodes");
    size_t up = 0;
    if (nodes_now.is_object()) {
      for (const auto& n : nodes_now["nodes"]) up += n.value("state", "") == "UP";
    }
    if (up == places.size()) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::string out = "agents did not come up:\n";
  for (size_t i = 0; i < places.size(); ++i) {
    out += ReadAll(c.dir + "/agent-node-" + static_cast<char>('a' + i) + ".log");
  }
  return out;
}

class TlsClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster = new Cluster;
    setup_error = StartCluster(*cluster);
  }
  static void TearDownTestSuite() {
    if (cluster != nullptr) {
      for (auto& a : cluster->agents) a->Stop(20);
      cluster->server.Stop(20);
      if (cluster->net) cluster->net->Down();
      if (!std::getenv("EMBODY_KEEP_TEST_DIR")) {
        std::error_code ec;
        std::filesystem::remove_all(cluster->dir, ec);
      }
    }
    delete cluster;
    cluster = nullptr;
  }
  void SetUp() override { ASSERT_EQ(setup_error, "") << setup_error; }
};

TEST_F(TlsClusterTest, TheServerAnswersTlsClientsOfItsCaOnly) {
  auto ours = cluster->Client(cluster->ca_file());
  ASSERT_NE(ours, nullptr);
  common::http::Request health;
  health.path = "/healthz";
  auto ok = ours->Send(health);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->status, 200);
  auto stranger = cluster->Client(cluster->stranger->ca_file());
  ASSERT_NE(stranger, nullptr);
  EXPECT_FALSE(stranger->Send(health).ok()) << "a server of another CA was trusted";
  // Plaintext to the TLS port: no HTTP answer.
  common::http::ClientOptions plain;
  plain.base_url = "http" + cluster->url.substr(5);
  plain.connect_timeout_s = 3;
  plain.read_timeout_s = 3;
  auto http = common::http::Client::Create(plain);
  ASSERT_TRUE(http.ok());
  auto refused = (*http)->Send(health);
  EXPECT_FALSE(refused.ok()) << "plaintext was answered: HTTP " << refused->status;
}

TEST_F(TlsClusterTest, AgentsRegisterHttpsUrls) {
  json nodes = cluster->Call("GET", "/v1/nodes");
  ASSERT_TRUE(nodes.is_object()) << nodes.dump();
  ASSERT_EQ(nodes["nodes"].size(), cluster->agents.size());
  for (const auto& n : nodes["nodes"]) {
    EXPECT_EQ(n.value("agent_url", "").rfind("https://", 0), 0u) << n.dump();
  }
}

json TrainSpec(int nodes) {
  return {{"name", "tls-train-" + std::to_string(nodes)},
          {"kind", "train"},
          {"resources",
           {{"nodes", nodes}, {"ranks_per_node", 1}, {"slot_type", "cpu"}, {"slots_per_rank", 1}}},
          {"engine",
           {{"optim", {{"steps", 30}, {"lr", 0.004}, {"warmup_steps", 2}}},
            {"data", {{"rows_per_step", 2}, {"tokens_per_row", 512}}},
            {"model",
             {{"d_model", 32}, {"layers", 1}, {"heads", 4}, {"mlp", 64}, {"action_horizon", 4}}},
            {"checkpoint", {{"every_steps", 10}, {"keep", 2}}}}}};
}

// Runs a training job on `nodes` nodes to its end; rank 0 posts its steps to its agent's local
// API over TLS (EMBODY_CA_FILE) and its checkpoints reach the server's blob store over TLS.
void TrainsReportsAndCheckpoints(int nodes) {
  int status = 0;
  json created = cluster->Call("POST", "/v1/jobs", TrainSpec(nodes).dump(), &status);
  ASSERT_EQ(status, 201) << created.dump();
  const int64_t id = created["id"].get<int64_t>();
  json job = cluster->WaitForState(id, {"SUCCEEDED", "FAILED", "CANCELLED"}, 240);
  ASSERT_EQ(job.value("state", ""), "SUCCEEDED")
      << job.dump(2) << cluster->Logs(id, -1) << ReadAll(cluster->dir + "/agent-node-a.log")
      << ReadAll(cluster->dir + "/agent-node-b.log");
  ASSERT_EQ(job["allocation"].size(), static_cast<size_t>(nodes)) << job.dump(2);
  json steps;
  for (int i = 0; i < 50; ++i) {
    steps = cluster->Call("GET", "/v1/jobs/" + std::to_string(id) + "/events?type=step&limit=100");
    if (steps.is_object() && steps["events"].size() >= 30) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(steps.is_object()) << steps.dump();
  EXPECT_EQ(steps["events"].size(), 30u) << "step events did not reach the agent over TLS";
  EXPECT_EQ(steps["events"].back()["data"]["world_size"], nodes);
  json checkpoints;
  for (int i = 0; i < 100; ++i) {
    checkpoints = cluster->Call("GET", "/v1/jobs/" + std::to_string(id) + "/checkpoints");
    if (checkpoints.is_object() && !checkpoints["checkpoints"].empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(checkpoints.is_object()) << checkpoints.dump();
  EXPECT_FALSE(checkpoints["checkpoints"].empty()) << "no checkpoint reached the server";
}

TEST_F(TlsClusterTest, AJobReportsAndCheckpointsOverTls) { TrainsReportsAndCheckpoints(1); }

// Two namespaces, two addresses: mpirun on the head starts the other node's daemon through that
// node's agent (rsh over TLS, verified with the CA file).
TEST_F(TlsClusterTest, AJobOnTwoNodesLaunchesThroughTheRshBridgeOverTls) {
  if (!cluster->net) GTEST_SKIP() << cluster->no_netns;
  TrainsReportsAndCheckpoints(2);
}

TEST_F(TlsClusterTest, TheCliTakesTheCaFile) {
  const std::string embody = std::string(EMBODY_BIN_DIR) + "/embody";
  auto run = [&](std::vector<std::string> args, const std::string& ca_env) {
    std::vector<std::string> argv = {"/usr/bin/env",
                                     "-u",
                                     "EMBODY_CA_FILE",
                                     "EMBODY_HOME=" + cluster->dir + "/no-home",
                                     "EMBODY_URL=" + cluster->url,
                                     "EMBODY_TOKEN=" + cluster->admin_token};
    if (!ca_env.empty()) argv.push_back("EMBODY_CA_FILE=" + ca_env);
    argv.push_back(embody);
    argv.insert(argv.end(), args.begin(), args.end());
    return embody::testing::RunCommand(argv);
  };
  auto by_flag = run({"--ca-file", cluster->ca_file(), "whoami"}, "");
  EXPECT_EQ(by_flag.exit_code, 0) << by_flag.output;
  auto by_env = run({"whoami"}, cluster->ca_file());
  EXPECT_EQ(by_env.exit_code, 0) << by_env.output;
  // The system's CAs do not know ours.
  auto none = run({"whoami"}, "");
  EXPECT_EQ(none.exit_code, 1) << none.output;
  auto missing = run({"--ca-file", cluster->dir + "/none.pem", "whoami"}, "");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.output.find("none.pem"), std::string::npos) << missing.output;
}

}  // namespace
