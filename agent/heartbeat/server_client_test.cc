#include "agent/heartbeat/server_client.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "agent/testing/test_util.h"
#include "common/request_id.h"

namespace agent {
namespace {

// A stand-in embody-server on a free port answering with a scripted status.
class FakeHttpServer {
 public:
  FakeHttpServer() {
    server_.Post(R"(/v1/agents/.*)", [this](const httplib::Request& req, httplib::Response& res) {
      last_path = req.path;
      last_auth = req.get_header_value("Authorization");
      last_body = req.body;
      last_request_id = req.get_header_value("X-Request-Id");
      ++in_handler;
      std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms.load()));
      --in_handler;
      res.status = status;
      res.set_content(reply, "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~FakeHttpServer() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  int status = 200;
  std::string reply;
  std::string last_path, last_auth, last_body, last_request_id;
  std::atomic<int> hold_ms{0};  // each reply waits this long first, as a held heartbeat does
  std::atomic<int> in_handler{0};

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

TEST(HttpServerChannelTest, RegisterAndHeartbeat) {
  FakeHttpServer fake;
  NodeCredential credential("agent-token", "/nonexistent/node.token");
  HttpServerChannel channel(fake.url(), /*ca_file=*/"", &credential);
  fake.reply = R"({"node_id": 12, "heartbeat_interval_ms": 500})";
  auto reg = channel.Register({"n1", "127.0.0.1", "http://127.0.0.1:1", 4, 1024, {}, {}});
  ASSERT_TRUE(reg.ok()) << reg.status().ToString();
  EXPECT_EQ(reg->node_id, 12);
  EXPECT_EQ(fake.last_path, "/v1/agents/register");
  EXPECT_EQ(fake.last_auth, "Bearer agent-token");

  fake.reply = R"({"commands": [{"type": "kill", "job_id": 3}]})";
  api::HeartbeatRequest hb;
  hb.logs.push_back({3, 0, 0, "bad utf-8 \xff\n"});  // must not fail the request
  auto reply = channel.Heartbeat(12, hb);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  ASSERT_EQ(reply->commands.size(), 1u);
  EXPECT_EQ(reply->commands[0].type, api::Command::Type::kKill);
  EXPECT_EQ(fake.last_path, "/v1/agents/12/heartbeat");
  // Each call carries a fresh request id, which the server logs with its access line.
  std::string first_id = fake.last_request_id;
  EXPECT_TRUE(common::IsSafeRequestId(first_id)) << first_id;
  ASSERT_TRUE(channel.Heartbeat(12, hb).ok());
  EXPECT_NE(fake.last_request_id, first_id);
}

TEST(HttpServerChannelTest, EachCallCarriesTheCurrentCredential) {
  FakeHttpServer fake;
  TempDir dir;
  NodeCredential credential("join-token", dir.path() + "/node.token");
  HttpServerChannel channel(fake.url(), /*ca_file=*/"", &credential);
  fake.reply = R"({"commands": []})";
  ASSERT_TRUE(channel.Heartbeat(12, {}).ok());
  EXPECT_EQ(fake.last_auth, "Bearer join-token");
  ASSERT_TRUE(credential.Adopt("node-token-1").ok());
  ASSERT_TRUE(channel.Heartbeat(12, {}).ok());
  EXPECT_EQ(fake.last_auth, "Bearer node-token-1");
  credential.Forget();
  ASSERT_TRUE(channel.Heartbeat(12, {}).ok());
  EXPECT_EQ(fake.last_auth, "Bearer join-token");
}

TEST(HttpServerChannelTest, MapsFailures) {
  FakeHttpServer fake;
  NodeCredential credential("t", "/nonexistent/node.token");
  HttpServerChannel channel(fake.url(), /*ca_file=*/"", &credential);
  fake.status = 404;
  fake.reply = R"({"error": {"code": "not_found", "message": "no node 12"}})";
  auto r = channel.Heartbeat(12, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), common::Code::kNotFound);
  EXPECT_NE(r.status().message().find("no node 12"), std::string::npos);
  fake.status = 503;
  EXPECT_EQ(channel.Heartbeat(12, {}).status().code(), common::Code::kUnavailable);
  fake.status = 401;
  EXPECT_EQ(channel.Heartbeat(12, {}).status().code(), common::Code::kUnauthenticated);

  HttpServerChannel nowhere("http://127.0.0.1:1", /*ca_file=*/"", &credential);
  EXPECT_EQ(nowhere.Heartbeat(1, {}).status().code(), common::Code::kUnavailable);
}

TEST(HttpServerChannelTest, InterruptAbortsAHeldHeartbeatAndTheNextCallWorks) {
  FakeHttpServer fake;
  NodeCredential credential("agent-token", "/nonexistent/node.token");
  HttpServerChannel channel(fake.url(), /*ca_file=*/"", &credential);
  fake.reply = R"({"commands": []})";
  ASSERT_TRUE(channel.Heartbeat(12, {}).ok());  // a kept-alive connection, as between beats
  fake.hold_ms = 3'000;
  api::HeartbeatRequest held;
  held.wait_ms = 3'000;
  const auto t0 = std::chrono::steady_clock::now();
  common::Result<api::HeartbeatResponse> r = api::HeartbeatResponse{};
  std::thread call([&] { r = channel.Heartbeat(12, held); });
  for (int i = 0; i < 300 && fake.in_handler.load() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(fake.in_handler.load(), 1);
  channel.Interrupt();  // a job ended: its report must not wait for the hold to end
  call.join();
  EXPECT_FALSE(r.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(2'000));
  // The channel connects again for the next call.
  fake.hold_ms = 0;
  EXPECT_TRUE(channel.Heartbeat(12, {}).ok());
}

}  // namespace
}  // namespace agent
