#include "agent/local_api/local_api.h"

#include <httplib.h>

#include <gtest/gtest.h>

#include "common/crypto.h"
#include "common/http/status_http.h"
#include "common/request_id.h"

namespace agent {
namespace {

constexpr const char* kScrapeSecret = "scrape-secret-0123456789abcdef";

class LocalApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    api_ = std::make_unique<LocalApi>(
        [](int64_t id) -> std::optional<JobIdentity> {
          if (id == 7) return JobIdentity{"secret-7", "acme"};
          return std::nullopt;
        },
        &events_, &metrics_, common::Sha256Hex(kScrapeSecret));
    auto port = api_->Start("127.0.0.1", 0);
    ASSERT_TRUE(port.ok()) << port.status().ToString();
    client_ = std::make_unique<httplib::Client>("127.0.0.1", *port);
  }

  httplib::Result Post(int64_t job, const std::string& token, const std::string& body) {
    httplib::Headers h;
    if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
    return client_->Post("/v1/local/jobs/" + std::to_string(job) + "/events", h, body,
                         "application/json");
  }
  // GET `path` with `authorization` as the header value (none when empty).
  httplib::Result Scrape(const std::string& authorization, const std::string& path = "/metrics") {
    httplib::Headers h;
    if (!authorization.empty()) h.emplace("Authorization", authorization);
    return client_->Get(path, h);
  }

  EventQueue events_;
  AgentMetrics metrics_;
  std::unique_ptr<LocalApi> api_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(LocalApiTest, AcceptsEventsWithTheJobToken) {
  auto r = Post(7, "secret-7",
                R"({"events":[{"type":"step","step":3,"steps":10,"loss":0.5,"tokens_per_s":1000,
                    "samples_per_s":20},{"type":"checkpoint","step":3,"path":"/c","bytes":9}]})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 202);
  auto batch = events_.Peek(10);
  ASSERT_EQ(batch.events.size(), 2u);
  EXPECT_EQ(batch.events[0].job_id, 7);
  EXPECT_EQ(batch.events[0].type, "step");
  EXPECT_GT(batch.events[0].time_ms, 0);
  EXPECT_EQ(batch.events[0].data["loss"], 0.5);
  EXPECT_EQ(batch.events[1].type, "checkpoint");

  // A single event object is accepted too.
  r = Post(7, "secret-7", R"({"type":"step","step":4,"loss":0.25})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 202);
  EXPECT_EQ(events_.size(), 3u);

  auto m = Scrape(std::string("Bearer ") + kScrapeSecret, "/metrics/jobs/7");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200);
  EXPECT_NE(m->body.find("embody_job_loss 0.25\n"), std::string::npos) << m->body;
  EXPECT_NE(m->body.find("embody_job_step 4\n"), std::string::npos);
  EXPECT_NE(m->body.find("embody_job_tokens_per_second 1000\n"), std::string::npos);
  metrics_.RemoveJob(7);
  m = Scrape(std::string("Bearer ") + kScrapeSecret, "/metrics/jobs/7");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->body, "");
}

TEST_F(LocalApiTest, RejectsWrongTokenUnknownJobAndBadBodies) {
  auto r = Post(7, "wrong", R"({"type":"step"})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  r = Post(7, "", R"({"type":"step"})");
  EXPECT_EQ(r->status, 401);
  r = Post(8, "secret-7", R"({"type":"step"})");
  EXPECT_EQ(r->status, 404);
  r = Post(7, "secret-7", "not json");
  EXPECT_EQ(r->status, 400);
  r = Post(7, "secret-7", R"({"events":[{"step":1}]})");
  EXPECT_EQ(r->status, 400);
  r = Post(7, "secret-7", R"({"events":{"type":"step"}})");
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(events_.size(), 0u);
}

TEST_F(LocalApiTest, EchoesOrAssignsRequestIds) {
  auto r = client_->Get("/healthz", httplib::Headers{{"X-Request-Id", "abc-123_x.y:z"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->get_header_value("X-Request-Id"), "abc-123_x.y:z");
  // Unsafe or missing ids are replaced by fresh ones, never echoed into logs.
  r = client_->Get("/healthz", httplib::Headers{{"X-Request-Id", "bad id\"{}"}});
  ASSERT_TRUE(r);
  std::string id = r->get_header_value("X-Request-Id");
  EXPECT_EQ(id.size(), 16u);
  EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
  auto other = client_->Get("/no/such/route");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 404);
  EXPECT_EQ(other->get_header_value("X-Request-Id").size(), 16u);
  EXPECT_NE(other->get_header_value("X-Request-Id"), id);
  EXPECT_EQ(common::RequestIdFor(std::string(129, 'a')).size(), 16u);
  EXPECT_EQ(common::RequestIdFor(std::string(128, 'a')), std::string(128, 'a'));
}

// Errors have embody-server's wire form, so the shared decoder gives the job its code back.
TEST_F(LocalApiTest, ErrorsDecodeWithTheSharedDecoder) {
  auto wrong = Post(7, "not-the-token", R"({"type":"step"})");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(common::http::StatusFromResponse(wrong->status, wrong->body).code(),
            common::Code::kUnauthenticated);
  auto gone = Post(99, "secret-7", R"({"type":"step"})");
  ASSERT_TRUE(gone);
  common::Status st = common::http::StatusFromResponse(gone->status, gone->body);
  EXPECT_EQ(st.code(), common::Code::kNotFound);
  EXPECT_EQ(st.message(), "job 99 is not running here");
  auto bad = Post(7, "secret-7", "[]");
  ASSERT_TRUE(bad);
  EXPECT_EQ(common::http::StatusFromResponse(bad->status, bad->body).code(),
            common::Code::kInvalidArgument);
  auto none = client_->Post("/v1/local/nothing", "{}", "application/json");
  ASSERT_TRUE(none);
  EXPECT_EQ(common::http::StatusFromResponse(none->status, none->body).code(),
            common::Code::kNotFound);
}

TEST_F(LocalApiTest, HealthAndNodeMetrics) {
  metrics_.SetNode(8, 0);
  auto h = client_->Get("/healthz");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  auto m = client_->Get("/metrics");
  ASSERT_TRUE(m);
  for (const char* name :
       {"embody_agent_heartbeats_total", "embody_agent_heartbeat_failures_total",
        "embody_node_cpu_slots 8", "embody_node_gpus 0", "embody_agent_jobs_running"}) {
    EXPECT_NE(m->body.find(name), std::string::npos) << name;
  }
}

// A job on the node can reach this port: without the scrape secret it learns no job id and no
// tenant, yet /metrics is not refused (the node's series are public); a job's series are served
// at /metrics/jobs/{id} to the secret only, and name neither the job nor its tenant.
TEST_F(LocalApiTest, PerJobSeriesOnlyWithTheScrapeSecret) {
  metrics_.SetNode(8, 0);
  ASSERT_EQ(Post(7, "secret-7", R"({"type":"step","step":4,"loss":0.25})")->status, 202);
  const std::string secret = kScrapeSecret;
  const std::vector<std::string> refused = {"",
                                            "Bearer wrong-secret-0123456789abcdef",
                                            "Bearer " + secret + "x",
                                            "Bearer " + secret.substr(0, secret.size() - 1),
                                            "Bearer ",
                                            "Basic " + secret,
                                            secret,
                                            "Bearer secret-7"};
  for (const std::string& authorization : refused) {
    auto m = Scrape(authorization);
    ASSERT_TRUE(m) << authorization;
    EXPECT_EQ(m->status, 200) << authorization;
    EXPECT_NE(m->body.find("embody_node_cpu_slots 8"), std::string::npos) << authorization;
    for (const char* leak : {"job=", "tenant=", "acme", "embody_job_"}) {
      EXPECT_EQ(m->body.find(leak), std::string::npos) << authorization << ": " << leak;
    }
    auto j = Scrape(authorization, "/metrics/jobs/7");
    ASSERT_TRUE(j) << authorization;
    EXPECT_EQ(j->status, 401) << authorization;
    EXPECT_EQ(j->body.find("embody_job_"), std::string::npos) << authorization;
    EXPECT_FALSE(api_->MayScrapeJobs(authorization)) << authorization;
  }
  // With the secret: the node's series stay the same, the job's come from its own path.
  auto m = Scrape("Bearer " + secret);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->body.find("embody_job_"), std::string::npos) << m->body;
  auto j = Scrape("Bearer " + secret, "/metrics/jobs/7");
  ASSERT_TRUE(j);
  EXPECT_EQ(j->status, 200);
  EXPECT_NE(j->body.find("embody_job_loss 0.25\n"), std::string::npos) << j->body;
  EXPECT_EQ(j->body.find("acme"), std::string::npos) << j->body;
  EXPECT_EQ(j->body.find("embody_node_"), std::string::npos) << j->body;
  // A job not running here, or an id no job has: no series, not an error.
  for (const char* path : {"/metrics/jobs/8", "/metrics/jobs/99999999999999999999999"}) {
    auto none = Scrape("Bearer " + secret, path);
    ASSERT_TRUE(none) << path;
    EXPECT_EQ(none->status, 200) << path;
    EXPECT_EQ(none->body, "") << path;
  }
  EXPECT_TRUE(api_->MayScrapeJobs("Bearer " + secret));
}

// A job's bad event is refused to the job, saying which and why, and counted by reason; nothing of
// that post is queued, so the heartbeat never carries it.
TEST_F(LocalApiTest, BadEventsAreRefusedWithTheReasonAndCounted) {
  struct Case {
    std::string body;
    std::string reason;
    std::string field;
  };
  const std::vector<Case> cases = {
      {R"({"events":[{"type":"step","step":1},{"type":"note","text":"a\u0000b"}]})", "bad_text",
       "events[1].text"},
      {R"({"type":"checkpoint","step":"7","path":"/c"})", "bad_field", "events[0].step"},
      {R"({"type":"step","loss":"low"})", "bad_field", "events[0].loss"},
      {R"({"type":"note","blob":")" + std::string(70 * 1024, 'x') + R"("})", "too_large",
       "events[0]"},
      {R"({"type":"no spaces"})", "bad_type", "events[0].type"},
      {R"({"events":[{"step":1}]})", "malformed", "events[0].type"},
  };
  for (const Case& c : cases) {
    LocalReply r = api_->PostEvents(7, "Bearer secret-7", c.body);
    EXPECT_EQ(r.http_status, 400) << c.body.substr(0, 80);
    common::Status st = common::http::StatusFromResponse(r.http_status, r.body);
    EXPECT_NE(st.message().find(c.reason), std::string::npos) << st.message();
    EXPECT_EQ(st.field(), c.field) << st.message();
  }
  EXPECT_EQ(events_.size(), 0u);
  const std::string m = metrics_.Serialize();
  for (const char* series :
       {R"(embody_agent_events_dropped_total{reason="bad_text"} 1)",
        R"(embody_agent_events_dropped_total{reason="bad_field"} 2)",
        R"(embody_agent_events_dropped_total{reason="too_large"} 1)",
        R"(embody_agent_events_dropped_total{reason="bad_type"} 1)",
        R"(embody_agent_events_dropped_total{reason="malformed"} 1)"}) {
    EXPECT_NE(m.find(series), std::string::npos) << series << "\n" << m;
  }
}

// A full queue refuses a post whole with 429 and Retry-After (the job may retry), counted as
// queue_full; old step events make room first, counted as evicted.
TEST(LocalApiQueueTest, AFullQueueAnswers429AndOldStepsMakeRoomFirst) {
  const std::string note = R"({"type":"note","blob":")" + std::string(1000, 'x') + R"("})";
  const size_t note_bytes = EventQueue::SizeOf(
      {7, 0, "note", nlohmann::json::parse(note)});
  EventQueue events(100, 2 * note_bytes + 10);
  AgentMetrics metrics;
  LocalApi api([](int64_t id) -> std::optional<JobIdentity> {
    if (id == 7) return JobIdentity{"secret-7", "acme"};
    return std::nullopt;
  }, &events, &metrics);
  auto port = api.Start("127.0.0.1", 0);
  ASSERT_TRUE(port.ok());
  httplib::Client client("127.0.0.1", *port);
  const httplib::Headers auth = {{"Authorization", "Bearer secret-7"}};
  const std::string path = "/v1/local/jobs/7/events";
  ASSERT_EQ(client.Post(path, auth, R"({"type":"step","step":1})", "application/json")->status,
            202);
  ASSERT_EQ(client.Post(path, auth, note, "application/json")->status, 202);
  ASSERT_EQ(client.Post(path, auth, note, "application/json")->status, 202);  // the step went
  auto full = client.Post(path, auth, note, "application/json");
  ASSERT_TRUE(full);
  EXPECT_EQ(full->status, 429);
  EXPECT_EQ(full->get_header_value("Retry-After"), "5");
  EXPECT_EQ(common::http::StatusFromResponse(full->status, full->body).code(),
            common::Code::kResourceExhausted);
  EXPECT_EQ(events.size(), 2u);
  const std::string m = metrics.Serialize();
  EXPECT_NE(m.find(R"(embody_agent_events_dropped_total{reason="queue_full"} 1)"),
            std::string::npos) << m;
  EXPECT_NE(m.find(R"(embody_agent_events_dropped_total{reason="evicted"} 1)"),
            std::string::npos) << m;
}

TEST(LocalApiNoSecretTest, AnAgentWithoutAScrapeSecretServesThePublicSetToEveryone) {
  EventQueue events;
  AgentMetrics metrics;
  LocalApi api([](int64_t) { return JobIdentity{"t", "acme"}; }, &events, &metrics);
  metrics.ObserveStep(7, "acme", nlohmann::json{{"step", 1}});
  for (const char* authorization :
       {"", "Bearer ", "Bearer x", "Bearer scrape-secret-0123456789abcdef"}) {
    EXPECT_FALSE(api.MayScrapeJobs(authorization)) << authorization;
  }
  auto port = api.Start("127.0.0.1", 0);
  ASSERT_TRUE(port.ok());
  httplib::Client client("127.0.0.1", *port);
  auto j = client.Get("/metrics/jobs/7");
  ASSERT_TRUE(j);
  EXPECT_EQ(j->status, 404);
  EXPECT_NE(j->body.find("--metrics-token-file"), std::string::npos) << j->body;
  auto m = client.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200);
  EXPECT_EQ(m->body.find("acme"), std::string::npos);
}

}  // namespace
}  // namespace agent
