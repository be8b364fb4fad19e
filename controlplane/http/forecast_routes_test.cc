// Forecasts over HTTP, on both stores: POST /v1/jobs?dry_run=true stores nothing and
// refuses as a submission does (a bad dry_run value, a body over the spec limit), GET
// /v1/jobs/{id}/forecast is the tenant's own, and the forecast made for a submitted job is
// stored (the forecast store: job_forecasts on PostgreSQL) and shown in its view.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "common/time_util.h"
#include "controlplane/testing/server_test_fixture.h"

namespace controlplane {
namespace {

using nlohmann::json;

class ForecastRoutesTest : public ServerTest {
 protected:
  static void SetUpTestSuite() {
    // Nodes registered here never heartbeat: a long interval keeps them UP for the suite.
    StartServer("forecast", 600'000);
    RegisterNode("n1", 2);
  }

  static json Job(const std::string& name, int ranks, int64_t limit_s) {
    return {{"name", name},
            {"kind", "command"},
            {"command", {"true"}},
            {"resources", {{"nodes", 1}, {"ranks_per_node", ranks}}},
            {"time_limit_seconds", limit_s}};
  }

  static int64_t Count(const std::string& path, const std::string& key) {
    Reply r = Call("GET", path, Admin());
    EXPECT_EQ(r.status, 200) << r.text;
    return static_cast<int64_t>(r.body[key].size());
  }
};

TEST_F(ForecastRoutesTest, ADryRunStoresNothingAndSaysWhenAndWhere) {
  const int64_t jobs = Count("/v1/jobs?limit=200", "jobs");
  const int64_t audit = Count("/v1/audit?limit=200", "entries");
  Reply r = Call("POST", "/v1/jobs?dry_run=true", Admin(), Job("dry", 1, 60).dump());
  ASSERT_EQ(r.status, 200) << r.text;
  EXPECT_EQ(r.body["dry_run"], true);
  EXPECT_EQ(r.body["admitted"], true);
  EXPECT_EQ(r.body["starts_now"], true);
  EXPECT_EQ(r.body["placement"]["nodes"][0]["node"], "n1");
  EXPECT_EQ(r.body["predicted_run_seconds"], 60.0);
  EXPECT_EQ(Count("/v1/jobs?limit=200", "jobs"), jobs);
  EXPECT_EQ(Count("/v1/audit?limit=200", "entries"), audit);
}

TEST_F(ForecastRoutesTest, HostileDryRunsAreRefusedAsSubmissionsAre) {
  Reply garbage = Call("POST", "/v1/jobs?dry_run=garbage", Admin(), Job("g", 1, 60).dump());
  EXPECT_EQ(garbage.status, 400) << garbage.text;
  EXPECT_EQ(garbage.body["error"]["field"], "dry_run");
  Reply yes = Call("POST", "/v1/jobs?dry_run=1", Admin(), Job("g", 1, 60).dump());
  EXPECT_EQ(yes.status, 400) << yes.text;

  // Over the spec's body limit, and a job no node can hold: the submission's own answers.
  json huge = Job("huge", 1, 60);
  huge["command"] = json::array();
  for (int i = 0; i < 40'000; ++i) huge["command"].push_back("argument-" + std::to_string(i));
  for (const json& body : {huge, Job("wide", 100, 60)}) {
    const int64_t jobs = Count("/v1/jobs?limit=200", "jobs");
    Reply dry = Call("POST", "/v1/jobs?dry_run=true", Admin(), body.dump());
    EXPECT_EQ(Count("/v1/jobs?limit=200", "jobs"), jobs);
    Reply real = Call("POST", "/v1/jobs", Admin(), body.dump());
    EXPECT_GE(dry.status, 400) << dry.text;
    EXPECT_EQ(dry.status, real.status) << dry.text << real.text;
    EXPECT_EQ(dry.body["error"], real.body["error"]);
  }
}

TEST_F(ForecastRoutesTest, AJobsForecastIsItsTenantsAndASubmittedJobsIsStored) {
  Reply t = Call("POST", "/v1/tenants", Admin(), json{{"name", "forecast-b"}}.dump());
  ASSERT_EQ(t.status, 201) << t.text;
  Reply tok = Call("POST", "/v1/tokens", Admin(),
                   json{{"tenant_id", t.body["id"]}, {"role", "member"}, {"name", "b"}}.dump());
  ASSERT_EQ(tok.status, 201) << tok.text;
  const std::string other = tok.body["token"];

  Reply sub = Call("POST", "/v1/jobs", Admin(), PendingSpec("waits").dump());
  ASSERT_EQ(sub.status, 201) << sub.text;
  const std::string id = sub.body["id"].dump();
  EXPECT_EQ(Call("GET", "/v1/jobs/" + id + "/forecast", other).status, 404);
  Reply mine = Call("GET", "/v1/jobs/" + id + "/forecast", Admin());
  ASSERT_EQ(mine.status, 200) << mine.text;
  EXPECT_EQ(mine.body["state"], "PENDING");
  // Only the draining node could hold it: no start can be predicted, and it says why.
  EXPECT_TRUE(mine.body["predicted_start"].is_null());
  EXPECT_FALSE(mine.body["reasons"].empty());

  // The forecast made when the scheduler first saw it, stored with the job.
  json view;
  for (int i = 0; i < 100; ++i) {
    view = Call("GET", "/v1/jobs/" + id, Admin()).body;
    if (view.contains("forecast")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(view.contains("forecast")) << view.dump();
  const json& f = view["forecast"];
  EXPECT_TRUE(f["predicted_start"].is_null()) << f;
  EXPECT_TRUE(f["start_error_seconds"].is_null()) << f;
  const auto made = common::ParseUtcTime(f["made_at"].get<std::string>());
  const auto created = common::ParseUtcTime(view["created_at"].get<std::string>());
  ASSERT_TRUE(made && created);
  EXPECT_GE(*made, *created);
  EXPECT_LT(*made - *created, 10'000);

  // A job that starts at once was forecast to start at once.
  Reply now = Call("POST", "/v1/jobs", Admin(), Job("now", 1, 60).dump());
  ASSERT_EQ(now.status, 201) << now.text;
  const std::string now_id = now.body["id"].dump();
  for (int i = 0; i < 100; ++i) {
    view = Call("GET", "/v1/jobs/" + now_id, Admin()).body;
    if (view.contains("forecast")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(view.contains("forecast")) << view.dump();
  EXPECT_EQ(view["forecast"]["predicted_start"], view["forecast"]["made_at"]);
  EXPECT_EQ(view["forecast"]["predicted_run_seconds"], 60.0);
  Reply running = Call("GET", "/v1/jobs/" + now_id + "/forecast", Admin());
  ASSERT_EQ(running.status, 200) << running.text;
  EXPECT_EQ(running.body["state"], "SCHEDULED");
  EXPECT_FALSE(running.body["predicted_end"].is_null());
}

}  // namespace
}  // namespace controlplane
