// The server's observability over loopback HTTP, on both stores (server_test_fixture.h): /metrics
// series that follow what happens, Prometheus service discovery and request ids in the log. On
// PostgreSQL only, as they measure it or reach into it: the pool's gauges, database errors
// counted, and the metrics history of a long job (thinned when stored, counted in its table,
// downsampled when read, tenant-scoped).
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <thread>

#include "common/crypto.h"
#include "common/time_util.h"
#include "controlplane/testing/server_test_fixture.h"

namespace controlplane {
namespace {

using nlohmann::json;

class ObservabilityTest : public ServerTest {
 protected:
  static void SetUpTestSuite() { StartServer("obs"); }

  // A job that fits no free node: it stays PENDING, which is all the events need.
  static int64_t SubmitPending(const std::string& name) {
    Reply r = Call("POST", "/v1/jobs", Admin(), PendingSpec(name).dump());
    EXPECT_EQ(r.status, 201) << r.text;
    return r.body.value("id", int64_t{0});
  }

  static int64_t Register(const std::string& name, const std::string& agent_url) {
    return RegisterNode(name, 1, agent_url);
  }

  // The value of one sample line of /metrics (exact labels as serialised), or -1 when absent.
  // Scraped as a cluster-admin: the per-tenant series are served to no one else.
  static double Sample(const std::string& series) {
    std::string text = Call("GET", "/metrics", Admin()).text;
    size_t at = text.find("\n" + series + " ");
    if (at == std::string::npos) return -1;
    return std::stod(text.substr(at + series.size() + 2));
  }

  // Polls Sample(series) until pred holds (the counts refresh once a second).
  template <typename Pred>
  static double WaitForSample(const std::string& series, Pred pred, double timeout_s = 10) {
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    double v = Sample(series);
    while (!pred(v) && std::chrono::steady_clock::now() < end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      v = Sample(series);
    }
    return v;
  }

  static int64_t SqlInt(const std::string& sql) {
    auto r = pg_->Psql(sql);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::stoll(*r) : -1;
  }

};

TEST_F(ObservabilityTest, MetricsFollowJobsAndScheduler) {
  const std::string requests =
      R"(embody_http_requests_total{method="GET",route="/v1/jobs/{id}",status="200"})";
  const double gets_before = std::max(0.0, Sample(requests));
  const std::string pending = R"(embody_jobs{state="PENDING",tenant="default"})";
  const double pending_before = std::max(0.0, Sample(pending));
  const std::string waiting = R"(embody_scheduler_decisions_total{decision="waiting"})";
  const double waiting_before = Sample(waiting);
  ASSERT_GE(waiting_before, 0);

  int64_t id = SubmitPending("metrics-pending");
  EXPECT_EQ(Call("GET", "/v1/jobs/" + std::to_string(id), Admin()).status, 200);
  EXPECT_EQ(Sample(requests), gets_before + 1);
  EXPECT_EQ(WaitForSample(pending, [&](double v) { return v == pending_before + 1; }),
            pending_before + 1);
  EXPECT_GE(WaitForSample("embody_scheduler_queue_depth", [](double v) { return v >= 1; }), 1);
  // The job fits nowhere: every leader cycle counts it as waiting.
  EXPECT_GT(WaitForSample(waiting, [&](double v) { return v > waiting_before; }), waiting_before);
  EXPECT_GT(Sample("embody_scheduler_cycle_seconds_count"), 0);
  EXPECT_EQ(Sample("embody_scheduler_leader"), 1);

  // Cancelled: PENDING goes back down and CANCELLED goes up, for the same tenant.
  const std::string cancelled = R"(embody_jobs{state="CANCELLED",tenant="default"})";
  const double cancelled_before = std::max(0.0, Sample(cancelled));
  ASSERT_EQ(Call("POST", "/v1/jobs/" + std::to_string(id) + "/cancel", Admin()).status, 200);
  EXPECT_EQ(WaitForSample(cancelled, [&](double v) { return v == cancelled_before + 1; }),
            cancelled_before + 1);
  EXPECT_EQ(WaitForSample(pending, [&](double v) { return v == pending_before; }), pending_before);
}

TEST_F(ObservabilityTest, DatabasePoolGaugesFollowItsConnectionsOnPostgres) {
  EMBODY_POSTGRES_ONLY();
  EXPECT_EQ(Sample("embody_db_pool_size"), 16);
  // Connections go back to the pool: one is idle at some scrape (the scheduler may hold one at
  // any given instant).
  EXPECT_GE(WaitForSample(R"(embody_db_pool_connections{state="idle"})",
                          [](double v) { return v >= 1; }),
            1);
  EXPECT_GE(Sample(R"(embody_db_pool_connections{state="in_use"})"), 0);
}

TEST_F(ObservabilityTest, DatabaseErrorsAreCountedOnPostgres) {
  EMBODY_POSTGRES_ONLY();
  int64_t id = SubmitPending("db-error");
  const double before = Sample("embody_db_errors_total");
  ASSERT_GE(before, 0);
  // A table the job view reads is gone for a moment: the request fails inside PostgreSQL.
  ASSERT_TRUE(pg_->Psql("ALTER TABLE checkpoints RENAME TO checkpoints_away").ok());
  // A 500 of a broken schema is what this test makes happen; no operation documents it.
  Reply broken = CallUndocumented("GET", "/v1/jobs/" + std::to_string(id), Admin());
  ASSERT_TRUE(pg_->Psql("ALTER TABLE checkpoints_away RENAME TO checkpoints").ok());
  EXPECT_EQ(broken.status, 500) << broken.text;
  EXPECT_GE(Sample("embody_db_errors_total"), before + 1);
  EXPECT_GE(
      Sample(R"(embody_http_requests_total{method="GET",route="/v1/jobs/{id}",status="500"})"), 1);
  EXPECT_EQ(Call("GET", "/v1/jobs/" + std::to_string(id), Admin()).status, 200);
  Call("POST", "/v1/jobs/" + std::to_string(id) + "/cancel", Admin());
}

TEST_F(ObservabilityTest, PrometheusServiceDiscoveryListsServerAndLiveAgents) {
  int64_t a = Register("sd-node-a", "http://127.0.0.1:19101");
  int64_t b = Register("sd-node-b", "http://127.0.0.1:19102/");
  Reply r = Call("GET", "/v1/prometheus/targets", Admin());
  ASSERT_EQ(r.status, 200) << r.text;
  ASSERT_TRUE(r.body.is_array()) << r.text;
  ASSERT_GE(r.body.size(), 3u) << r.text;
  EXPECT_EQ(r.body[0], (json{{"targets", {"127.0.0.1:" + std::to_string(server_->port())}},
                             {"labels", {{"role", "server"}}}}));
  auto group_of = [](const json& groups, const std::string& node) -> json {
    for (const auto& g : groups) {
      if (g["labels"].value("node", "") == node) return g;
    }
    return nullptr;
  };
  EXPECT_EQ(group_of(r.body, "sd-node-a"),
            (json{{"targets", {"127.0.0.1:19101"}},
                  {"labels",
                   {{"role", "agent"}, {"node", "sd-node-a"}, {"node_id", std::to_string(a)}}}}));
  EXPECT_EQ(group_of(r.body, "sd-node-b")["targets"], json({"127.0.0.1:19102"}));

  // Only cluster admins see the cluster's layout.
  EXPECT_EQ(Call("GET", "/v1/prometheus/targets", "").status, 401);
  EXPECT_EQ(Call("GET", "/v1/prometheus/targets", Agent()).status, 403);

  // A node that stops heartbeating becomes DOWN and leaves the targets.
  {
    auto unit = Store().Begin();
    ASSERT_TRUE(unit.ok()) << unit.status().ToString();
    ASSERT_TRUE((*unit)->nodes().Touch(b, common::NowMillis() - 3'600'000).ok());
    ASSERT_TRUE((*unit)->Commit().ok());
  }
  json after;
  for (int i = 0; i < 100; ++i) {
    after = Call("GET", "/v1/prometheus/targets", Admin()).body;
    if (group_of(after, "sd-node-b").is_null()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(group_of(after, "sd-node-b").is_null()) << after.dump();
  // sd-node-b, and the parked node, which never heartbeats.
  EXPECT_GE(WaitForSample(R"(embody_nodes{state="DOWN"})", [](double v) { return v >= 2; }), 2);
}

TEST_F(ObservabilityTest, LongJobHistoryIsThinnedAndDownsampledOnPostgres) {
  EMBODY_POSTGRES_ONLY();
  // The only node with two free slots: the job is placed there, so its events are accepted.
  int64_t node = RegisterNode("history-node", 2, "http://127.0.0.1:19200");
  json spec = PendingSpec("long-history");
  spec["resources"]["ranks_per_node"] = 2;
  Reply submitted = Call("POST", "/v1/jobs", Admin(), spec.dump());
  ASSERT_EQ(submitted.status, 201) << submitted.text;
  const int64_t id = submitted.body["id"];
  const std::string job = std::to_string(id);
  for (int i = 0; i < 100 && Call("GET", "/v1/jobs/" + job, Admin()).body["state"] == "PENDING";
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(Call("GET", "/v1/jobs/" + job, Admin()).body["state"], "SCHEDULED");
  constexpr int kSteps = 10000;
  constexpr int kBatch = 333;  // batch ends fall on kept and on thinned steps alike
  int provisional_seen = 0;
  for (int first = 1; first <= kSteps; first += kBatch) {
    const int last = std::min(kSteps, first + kBatch - 1);
    json events = json::array();
    for (int s = first; s <= last; ++s) {
      events.push_back(
          {{"job_id", id},
           {"time_ms", 1700000000000LL + s},
           {"type", "step"},
           {"data",
            {{"step", s}, {"steps", kSteps}, {"loss", 1.0 / s}, {"tokens_per_s", 1000.0 + s}}}});
    }
    Reply hb = Call("POST", "/v1/agents/" + std::to_string(node) + "/heartbeat", NodeToken(node),
                    json{{"events", events}}.dump());
    ASSERT_EQ(hb.status, 200) << hb.text;
    // The latest step is always on record, kept by the policy or not.
    Reply j = Call("GET", "/v1/jobs/" + job, Admin());
    ASSERT_EQ(j.body["last_step"]["step"], last) << j.text.substr(0, 300);
    const int64_t provisional =
        SqlInt("SELECT count(*) FROM job_events WHERE provisional AND job_id = " + job);
    EXPECT_LE(provisional, 1);
    provisional_seen += static_cast<int>(provisional);
  }
  EXPECT_GT(provisional_seen, 0) << "no batch ended on a thinned step: the test proves less";

  // Stored rows: every step up to 1,000, then K/2 per doubling (2,625 for 10,000 steps).
  const int64_t stored =
      SqlInt("SELECT count(*) FROM job_events WHERE type = 'step' AND job_id = " + job);
  EXPECT_GE(stored, 2600);
  EXPECT_LE(stored, 2626);

  Reply m = Call("GET", "/v1/jobs/" + job + "/metrics?names=loss,tokens_per_s", Admin());
  ASSERT_EQ(m.status, 200) << m.text.substr(0, 300);
  ASSERT_EQ(m.body["series"].size(), 2u);
  for (const char* name : {"loss", "tokens_per_s"}) {
    const json& points = m.body["series"][name];
    ASSERT_LE(points.size(), 500u) << name;
    ASSERT_GE(points.size(), 450u) << name;
    EXPECT_LE(points.front()[0].get<int64_t>(), 1 + kSteps / 500) << name;
    EXPECT_EQ(points.back()[0].get<int64_t>(), kSteps) << name;
    for (size_t i = 1; i < points.size(); ++i) {
      ASSERT_LT(points[i - 1][0].get<int64_t>(), points[i][0].get<int64_t>());
      // No gap wider than two buckets: the whole range is covered.
      ASSERT_LE(points[i][0].get<int64_t>() - points[i - 1][0].get<int64_t>(), 2 * kSteps / 500);
    }
    const json& p = points[10];
    EXPECT_EQ(p[1].get<int64_t>(), 1700000000000LL + p[0].get<int64_t>());  // time_ms
    const double want =
        std::string(name) == "loss" ? 1.0 / p[0].get<double>() : 1000.0 + p[0].get<double>();
    EXPECT_DOUBLE_EQ(p[2].get<double>(), want);
  }

  Reply few =
      Call("GET", "/v1/jobs/" + job + "/metrics?names=loss&since=9000&max_points=50", Admin());
  ASSERT_EQ(few.status, 200) << few.text;
  const json& tail = few.body["series"]["loss"];
  ASSERT_LE(tail.size(), 50u);
  ASSERT_GE(tail.size(), 40u);
  EXPECT_GE(tail.front()[0].get<int64_t>(), 9000);
  EXPECT_EQ(tail.back()[0].get<int64_t>(), kSteps);

  // By time: the last 100 steps were stamped in the last 100 ms of the run.
  Reply recent = Call(
      "GET", "/v1/jobs/" + job + "/metrics?names=loss&since=2023-11-14T22:13:29.900Z", Admin());
  ASSERT_EQ(recent.status, 200) << recent.text;
  for (const auto& p : recent.body["series"]["loss"]) EXPECT_GE(p[1].get<int64_t>(), 1700000009900);
  EXPECT_FALSE(recent.body["series"]["loss"].empty());

  // No names: every numeric field but the step.
  Reply all = Call("GET", "/v1/jobs/" + job + "/metrics?max_points=5", Admin());
  ASSERT_EQ(all.status, 200);
  EXPECT_EQ(all.body["series"].size(), 3u) << all.text;  // loss, steps, tokens_per_s
  EXPECT_LE(all.body["series"]["loss"].size(), 5u);

  EXPECT_EQ(Call("GET", "/v1/jobs/" + job + "/metrics?max_points=0", Admin()).status, 400);
  EXPECT_EQ(Call("GET", "/v1/jobs/" + job + "/metrics?names=a%20b", Admin()).status, 400);
  EXPECT_EQ(Call("GET", "/v1/jobs/999999/metrics", Admin()).status, 404);
  EXPECT_EQ(Call("GET", "/v1/jobs/" + job + "/metrics", Agent()).status, 403);

  // Another tenant's member cannot see the job (not found, never forbidden).
  const std::string other_token = "obs-test-other-tenant-token";
  ASSERT_TRUE(pg_->Psql("INSERT INTO tenants (name) VALUES ('other');"
                        "INSERT INTO tokens (hash, tenant_id, role, name) SELECT '" +
                        common::Sha256Hex(other_token) +
                        "', id, 'member', 'test' FROM tenants WHERE name = 'other'")
                  .ok());
  EXPECT_EQ(Call("GET", "/v1/jobs/" + job + "/metrics", other_token).status, 404);
  Call("POST", "/v1/jobs/" + job + "/cancel", Admin());
}

TEST_F(ObservabilityTest, CallersRequestIdIsInTheServersLogLine) {
  int64_t node = Register("request-id-node", "http://127.0.0.1:19300");
  ::testing::internal::CaptureStderr();
  Reply hb = Call("POST", "/v1/agents/" + std::to_string(node) + "/heartbeat", NodeToken(node), "{}",
                  {{"X-Request-Id", "agent-hb-7f3a.1"}});
  Reply unsafe = Call("GET", "/healthz", "", "", {{"X-Request-Id", "two words\"}"}});
  std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(hb.status, 200) << hb.text;
  EXPECT_EQ(hb.request_id, "agent-hb-7f3a.1");
  EXPECT_NE(unsafe.request_id, "two words\"}");
  EXPECT_EQ(unsafe.request_id.size(), 16u);
  // One JSON line for the heartbeat, with the agent's id and the route pattern.
  std::regex line(R"(\{[^\n]*"request_id":"agent-hb-7f3a\.1"[^\n]*\})");
  std::smatch found;
  ASSERT_TRUE(std::regex_search(log, found, line)) << log;
  json entry = json::parse(found.str(), nullptr, false);
  ASSERT_FALSE(entry.is_discarded()) << found.str();
  EXPECT_EQ(entry["route"], "/v1/agents/{id}/heartbeat");
  EXPECT_EQ(entry["status"], "200");
  EXPECT_EQ(entry["level"], "info");
}

}  // namespace
}  // namespace controlplane
