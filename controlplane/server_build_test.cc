// Server::Build on a store without the optional parts of a shared one (server.h, ServerStore):
// the in-memory twin. The server leads the scheduler alone, its principal cache is on from the
// start and forgets a revoked token before the revocation is answered, /readyz answers while it
// serves, and the pool's gauges stay at zero.
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
  const std::string path = "/v1/jobs/" + j.body["id"].dump();
  json view;
  for (int i = 0; i < 200; ++i) {
    view = Call("GET", path, Admin()).body;
    if (view["state"] == "SCHEDULED") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(view["state"], "SCHEDULED") << view.dump();
}

}  // namespace
}  // namespace controlplane
