#include "engine/report/event_reporter.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/time_util.h"

namespace engine {
namespace {

// A stand-in for the agent's job-local API on a free loopback port.
class FakeAgent {
 public:
  FakeAgent() {
    server_.Post(R"(/v1/local/jobs/([^/]+)/events)",
                 [this](const httplib::Request& req, httplib::Response& res) {
                   std::lock_guard<std::mutex> lock(mu_);
                   paths_.push_back(req.path);
                   auths_.push_back(req.get_header_value("Authorization"));
                   bodies_.push_back(nlohmann::json::parse(req.body));
                   res.status = 202;
                 });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~FakeAgent() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<nlohmann::json> bodies() {
    std::lock_guard<std::mutex> lock(mu_);
    return bodies_;
  }
  std::vector<std::string> auths() {
    std::lock_guard<std::mutex> lock(mu_);
    return auths_;
  }
  std::vector<std::string> paths() {
    std::lock_guard<std::mutex> lock(mu_);
    return paths_;
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> paths_, auths_;
  std::vector<nlohmann::json> bodies_;
};

TEST(EventReporterTest, BatchesEventsWithTokenAndFlushesOnClose) {
  FakeAgent agent;
  ReporterConfig c;
  c.agent_url = agent.url();
  c.job_id = "17";
  c.token = "secret-token";
  HttpEventReporter reporter(c);
  const int kEvents = 500;
  const double start = common::MonotonicSeconds();
  for (int i = 1; i <= kEvents; ++i) reporter.Post({{"type", "step"}, {"step", i}});
  EXPECT_LT(common::MonotonicSeconds() - start, 0.1);  // posting never waits on the network
  reporter.Close();

  auto bodies = agent.bodies();
  ASSERT_FALSE(bodies.empty());
  EXPECT_LE(bodies.size(), 5u);  // batched: a few requests, not one per event
  int next = 1;
  for (const auto& b : bodies) {
    for (const auto& e : b["events"]) EXPECT_EQ(e["step"], next++);
  }
  EXPECT_EQ(next, kEvents + 1);  // every event arrived, in order
  for (const auto& a : agent.auths()) EXPECT_EQ(a, "Bearer secret-token");
  for (const auto& p : agent.paths()) EXPECT_EQ(p, "/v1/local/jobs/17/events");
  auto s = reporter.stats();
  EXPECT_EQ(s.events_sent, kEvents);
  EXPECT_EQ(s.posts_failed, 0);
}

TEST(EventReporterTest, FlushesPeriodicallyWhileRunning) {
  FakeAgent agent;
  ReporterConfig c;
  c.agent_url = agent.url() + "/";
  c.job_id = "3";
  HttpEventReporter reporter(c);
  reporter.Post({{"type", "step"}, {"step", 1}});
  const double deadline = common::MonotonicSeconds() + 5.0;
  while (agent.bodies().empty() && common::MonotonicSeconds() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(agent.bodies().size(), 1u);
  reporter.Close();
}

TEST(EventReporterTest, UnreachableAgentIsNotFatal) {
  int port;
  {
    // A port that was free a moment ago: nothing listens there now.
    httplib::Server s;
    port = s.bind_to_any_port("127.0.0.1");
  }
  ReporterConfig c;
  c.agent_url = "http://127.0.0.1:" + std::to_string(port);
  c.job_id = "1";
  c.connect_timeout_s = 0.2;
  c.io_timeout_s = 0.2;
  HttpEventReporter reporter(c);
  reporter.Post({{"type", "step"}, {"step", 1}});
  const double start = common::MonotonicSeconds();
  reporter.Close();
  EXPECT_LT(common::MonotonicSeconds() - start, 3.0);
  auto s = reporter.stats();
  EXPECT_EQ(s.posts_failed, 1);
  EXPECT_EQ(s.events_dropped, 1);
}

TEST(EventReporterTest, BadUrlDropsEvents) {
  ReporterConfig c;
  c.agent_url = "ftp://example.invalid";
  c.job_id = "1";
  HttpEventReporter reporter(c);
  reporter.Post({{"type", "step"}});
  reporter.Close();
  EXPECT_EQ(reporter.stats().events_dropped, 1);
}

}  // namespace
}  // namespace engine
