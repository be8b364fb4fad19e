// The fixture of the HTTP suites: one embody-server in-process on a free loopback port, started
// once per suite on the store `Backend` provides, and a loopback client for it. Nodes are
// registered as agents do (join token -> node credential, kept per node id), and a draining node
// "parked" with 64 cpu slots makes PendingSpec jobs admissible but never placed. Every answer
// `Call` gets is held against docs/api/openapi.yaml (tests/support/documented_response.h).
//
// Backend is the store: a class with
//   static common::Result<std::unique_ptr<Server>> StartOn(ServerOptions& o);  // fills o.db etc.
//   static void StopStore();  // after the server is gone
//   static common::Result<std::unique_ptr<Server>> StartAnother(ServerOptions& o);  // same store
//   static service::Database& Store();  // the store itself, for rows no route writes
// whose statics the suites can reach (the PostgreSQL backend's cluster is `pg_`). Backends:
// PgServerBackend (pg_server_fixture.h: InProcessServerTest) and MemoryServerBackend
// (memory_server_fixture.h: MemoryServerFixture). A suite changes store by changing its fixture;
// server_test_fixture.h picks one per binary for the suites that run on both.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "controlplane/server.h"
#include "tests/support/documented_response.h"

namespace controlplane {

struct Reply {
  int status = 0;  // 0: no connection
  nlohmann::json body;
  std::string text;
  std::string request_id;
  httplib::Headers headers;
};

template <class Backend>
class ServerFixture : public ::testing::Test, public Backend {
 protected:
  // Call from the suite's SetUpTestSuite; `name` labels the temp directory.
  // `heartbeat_interval_ms`: nodes the test registers and never heartbeats go DOWN after three.
  // `web_dir`: the dashboard's files ("": the build's, which may not be built). `tune` changes
  // the server's options last (e.g. the submission batch window).
  static void StartServer(const std::string& name, int heartbeat_interval_ms = 1000,
                          const std::string& web_dir = "",
                          const std::function<void(ServerOptions&)>& tune = nullptr) {
    std::string tmpl = "/tmp/embody-cp-" + name + "-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = new std::string(tmpl);
    ServerOptions o;
    o.data_dir = *dir_ + "/data";
    o.bootstrap_out = *dir_ + "/bootstrap.json";
    o.port_file = *dir_ + "/port";
    o.heartbeat_interval_ms = heartbeat_interval_ms;
    o.scheduler_period_ms = 100;
    o.dataset_root = *dir_ + "/datasets";
    if (!web_dir.empty()) o.web_dir = web_dir;
    if (tune) tune(o);
    auto server = Backend::StartOn(o);
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
    Backend::StopStore();
    delete node_tokens_;
    node_tokens_ = nullptr;
    if (dir_) std::filesystem::remove_all(*dir_);
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(server_, nullptr); }

  static std::string Admin() { return server_->bootstrap().admin_token; }
  static std::string Agent() { return server_->bootstrap().agent_token; }

  // One request; the answer is held against docs/api/openapi.yaml: an operation or status the
  // document does not give, a media type it does not give for that status, or a JSON body off
  // the status's schema fails the test (the request goes on: the caller's own checks still run).
  static Reply Call(const std::string& method, const std::string& path, const std::string& token,
                    const std::string& body = "", httplib::Headers headers = {}) {
    Reply r = CallUndocumented(method, path, token, body, std::move(headers));
    ExpectDocumented(method, path, r);
    return r;
  }

  // Call without the document's check, for a request the document deliberately does not cover
  // (an unknown route, a method no route has). A documented route answering garbage is still
  // documented: use Call.
  static Reply CallUndocumented(const std::string& method, const std::string& path,
                                const std::string& token, const std::string& body = "",
                                httplib::Headers headers = {}) {
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

  static void ExpectDocumented(const std::string& method, const std::string& path, const Reply& r) {
    if (r.status == 0) return;  // no answer: the caller's own checks say so
    const auto& doc = embody::testing::ApiDocument();
    if (!doc.ok()) {
      ADD_FAILURE() << "docs/api/openapi.yaml: " << doc.status().ToString();
      return;
    }
    auto type = r.headers.find("Content-Type");
    const auto errors = embody::testing::ResponseViolations(
        *doc, method, path, r.status, type == r.headers.end() ? "" : type->second, r.text);
    if (errors.empty()) return;
    std::string lines;
    for (const auto& e : errors) lines += "  " + e + "\n";
    constexpr size_t kExcerpt = 400;
    ADD_FAILURE() << method << " " << path << " answered " << r.status
                  << ", against docs/api/openapi.yaml:\n"
                  << lines << "  body: " << r.text.substr(0, kExcerpt)
                  << (r.text.size() > kExcerpt ? "..." : "");
  }

  static inline std::string* dir_ = nullptr;
  static inline Server* server_ = nullptr;
  static inline std::map<int64_t, std::string>* node_tokens_ = nullptr;
};

}  // namespace controlplane
