// Test fixture for the pg suites of the HTTP layer: one embody-server in-process on port 0
// against a private PostgreSQL, started once per test binary, and a loopback client for it.
// Nodes are registered as agents do (join token -> node credential, kept per node id), and a
// draining node "parked" with 64 cpu slots makes PendingSpec jobs admissible but never placed.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "controlplane/server.h"
#include "tests/support/pg_harness.h"

namespace controlplane {

struct Reply {
  int status = 0;  // 0: no connection
  nlohmann::json body;
  std::string text;
  std::string request_id;
  httplib::Headers headers;
};

class InProcessServerTest : public ::testing::Test {
 protected:
  // Call from the suite's SetUpTestSuite; `name` labels the temp directory.
  // `heartbeat_interval_ms`: nodes the test registers and never heartbeats go DOWN after three.
  // `web_dir`: the dashboard's files ("": the build's, which may not be built). `tune` changes
  // the server's options last (e.g. the submission batch window).
  static void StartServer(const std::string& name, int heartbeat_interval_ms = 1000,
                          const std::string& web_dir = "",
                          const std::function<void(ServerOptions&)>& tune = nullptr) {
    pg_ = new embody::testing::PgCluster;
    common::Status st = pg_->Start();
    ASSERT_TRUE(st.ok()) << st.ToString();
    std::string tmpl = "/tmp/embody-cp-" + name + "-XXXXXX";
    dir_ = new std::string(mkdtemp(tmpl.data()));
    ServerOptions o;
    o.db = pg_->conninfo();
    o.data_dir = *dir_ + "/data";
    o.bootstrap_out = *dir_ + "/bootstrap.json";
    o.port_file = *dir_ + "/port";
    o.heartbeat_interval_ms = heartbeat_interval_ms;
    o.scheduler_period_ms = 100;
    o.dataset_root = *dir_ + "/datasets";
    if (!web_dir.empty()) o.web_dir = web_dir;
    if (tune) tune(o);
    auto server = Server::Start(o);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = server.value().release();
    node_tokens_ = new std::map<int64_t, std::string>;
    const int64_t parked = RegisterNode("parked", 64);
    ASSERT_EQ(Call("POST", "/v1/nodes/" + std::to_string(parked) + "/drain", Admin()).status, 200);
  }

  // Registers a node with the join token and keeps the credential it is given.
  static int64_t RegisterNode(const std::string& name, int slots,
                              const std::string& agent_url = "") {
    nlohmann::json req = {{"name", name}, {"address", "127.0.0.1"}, {"cpu_slots", slots}};
    if (!agent_url.empty()) req["agent_url"] = agent_url;
    Reply r = Call("POST", "/v1/agents/register", Agent(), req.dump());
    EXPECT_EQ(r.status, 200) << r.text;
    const int64_t id = r.body.value("node_id", int64_t{0});
    (*node_tokens_)[id] = r.body.value("node_token", "");
    return id;
  }
  static std::string NodeToken(int64_t node) { return (*node_tokens_)[node]; }

  // A job the cluster could run (on the parked node) but never places: it stays PENDING.
  static nlohmann::json PendingSpec(const std::string& name) {
    return {{"name", name},
            {"kind", "command"},
            {"command", {"true"}},
            {"resources", {{"nodes", 1}, {"ranks_per_node", 64}}}};
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    delete pg_;
    pg_ = nullptr;
    delete node_tokens_;
    node_tokens_ = nullptr;
    if (dir_) std::filesystem::remove_all(*dir_);
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(server_, nullptr); }

  static std::string Admin() { return server_->bootstrap().admin_token; }
  static std::string Agent() { return server_->bootstrap().agent_token; }

  static Reply Call(const std::string& method, const std::string& path, const std::string& token,
                    const std::string& body = "", httplib::Headers headers = {}) {
    httplib::Client cli("127.0.0.1", server_->port());
    cli.set_read_timeout(30, 0);
    if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
    httplib::Result res =
        method == "GET"      ? cli.Get(path.c_str(), headers)
        : method == "PATCH"  ? cli.Patch(path.c_str(), headers, body, "application/json")
        : method == "DELETE" ? cli.Delete(path.c_str(), headers, body, "application/json")
        : method == "PUT"    ? cli.Put(path.c_str(), headers, body, "application/octet-stream")
                             : cli.Post(path.c_str(), headers, body, "application/json");
    Reply r;
    if (!res) return r;
    r.status = res->status;
    r.text = res->body;
    r.request_id = res->get_header_value("X-Request-Id");
    r.headers = res->headers;
    r.body = nlohmann::json::parse(res->body, nullptr, false);
    return r;
  }

  static inline embody::testing::PgCluster* pg_ = nullptr;
  static inline std::string* dir_ = nullptr;
  static inline Server* server_ = nullptr;
  static inline std::map<int64_t, std::string>* node_tokens_ = nullptr;
};

}  // namespace controlplane
