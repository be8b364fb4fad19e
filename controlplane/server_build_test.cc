// Server::Build on a store without the optional parts of a shared one (server.h, ServerStore):
// the in-memory twin. The server leads the scheduler alone, its principal cache is on from the
// start and forgets a revoked token before the revocation is answered, /readyz answers while it
// serves, the pool's gauges stay at zero, and the node service reports each stored end's launch
// phases to the metrics.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "controlplane/testing/memory_server_fixture.h"

namespace controlplane {
namespace {

using nlohmann::json;

class ServerBuildTest : public MemoryServerFixture {
 protected:
  static void SetUpTestSuite() { StartServer("build", /*heartbeat_interval_ms=*/60'000); }

  static bool HasLine(const std::string& text, const std::string& line) {
    return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
  }

  // The value of the sample line that starts with `series` in /metrics; 0 when it is absent.
  static double Sample(const std::string& series) {
    const std::string text = "\n" + Call("GET", "/metrics", Admin()).text;
    const size_t at = text.find("\n" + series + " ");
    return at == std::string::npos ? 0.0 : std::stod(text.substr(at + series.size() + 2));
  }

  // Polls job `id` until it is SCHEDULED (at most 10 s); returns its view.
  static json WaitScheduled(const std::string& id) {
    json view;
    for (int i = 0; i < 200; ++i) {
      view = Call("GET", "/v1/jobs/" + id, Admin()).body;
      if (view["state"] == "SCHEDULED") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return view;
  }
};

TEST_F(ServerBuildTest, RefusesAStoreWithoutADatabase) {
  ServerOptions o;
  o.data_dir = *dir_ + "/refused";
  auto server = Server::Build(o, ServerStore{});
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), common::Code::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(o.data_dir));
}

TEST_F(ServerBuildTest, ReadyWhileServingAndNoPoolToReport) {
  EXPECT_EQ(Call("GET", "/readyz", "").status, 200);
  const Reply metrics = Call("GET", "/metrics", Admin());
  ASSERT_EQ(metrics.status, 200) << metrics.text;
  EXPECT_TRUE(HasLine(metrics.text, "embody_db_pool_size 0")) << metrics.text.substr(0, 2000);
  EXPECT_TRUE(HasLine(metrics.text, "embody_auth_cache_enabled 1")) << metrics.text.substr(0, 2000);
}

TEST_F(ServerBuildTest, TheCacheForgetsARevokedTokenBeforeTheRevocationIsAnswered) {
  Reply t = Call("POST", "/v1/tenants", Admin(), json{{"name", "revokers"}}.dump());
  ASSERT_EQ(t.status, 201) << t.text;
  Reply made =
      Call("POST", "/v1/tokens", Admin(),
           json{{"tenant_id", t.body["id"]}, {"role", "member"}, {"name", "soon-revoked"}}.dump());
  ASSERT_EQ(made.status, 201) << made.text;
  const std::string token = made.body["token"];
  // Twice: the second is answered from the cache.
  ASSERT_EQ(Call("GET", "/v1/whoami", token).status, 200);
  ASSERT_EQ(Call("GET", "/v1/whoami", token).status, 200);
  ASSERT_EQ(Call("DELETE", "/v1/tokens/" + made.body["id"].dump(), Admin()).status, 200);
  EXPECT_EQ(Call("GET", "/v1/whoami", token).status, 401);
}

TEST_F(ServerBuildTest, LeadsTheSchedulerAlone) {
  RegisterNode("worker", 1);
  Reply j = Call("POST", "/v1/jobs", Admin(),
                 json{{"name", "placed"},
                      {"kind", "command"},
                      {"command", {"true"}},
                      {"resources", {{"nodes", 1}}}}
                     .dump());
  ASSERT_EQ(j.status, 201) << j.text;
  const json view = WaitScheduled(j.body["id"].dump());
  EXPECT_EQ(view["state"], "SCHEDULED") << view.dump();
}

// The server builds its node service with the metrics' launch phase observer: an end stored by
// a heartbeat adds one sample to each phase the server timed itself.
TEST_F(ServerBuildTest, AStoredEndIsObservedInTheLaunchPhaseMetrics) {
  const std::string queued = R"(embody_job_launch_phase_seconds_count{phase="queued"})";
  const std::string dispatch = R"(embody_job_launch_phase_seconds_count{phase="dispatch"})";
  const double queued_before = Sample(queued), dispatch_before = Sample(dispatch);
  RegisterNode("observed", 1);
  Reply j = Call("POST", "/v1/jobs", Admin(),
                 json{{"name", "observed"},
                      {"kind", "command"},
                      {"command", {"true"}},
                      {"resources", {{"nodes", 1}}}}
                     .dump());
  ASSERT_EQ(j.status, 201) << j.text;
  const int64_t id = j.body["id"];
  const json view = WaitScheduled(std::to_string(id));
  ASSERT_EQ(view["state"], "SCHEDULED") << view.dump();
  // Its head: whichever free node the scheduler chose.
  const int64_t head = view["allocation"][0].value("node_id", int64_t{0});
  ASSERT_NE(head, 0) << view.dump();
  const std::string beat = "/v1/agents/" + std::to_string(head) + "/heartbeat";
  Reply sent = Call("POST", beat, NodeToken(head), "{}");
  ASSERT_EQ(sent.status, 200) << sent.text;
  ASSERT_EQ(sent.body["commands"].size(), 1u) << sent.text;
  EXPECT_EQ(sent.body["commands"][0]["job_id"], id);
  Reply ended = Call("POST", beat, NodeToken(head),
                     json{{"finished", {{{"job_id", id}, {"exit_code", 0}}}}}.dump());
  ASSERT_EQ(ended.status, 200) << ended.text;
  EXPECT_EQ(Sample(queued), queued_before + 1);
  EXPECT_EQ(Sample(dispatch), dispatch_before + 1);
}

}  // namespace
}  // namespace controlplane
