// Audit rows of unauthenticated refusals are bounded per client address: anyone can send them,
// and each would otherwise be a row. Past the budget they are counted, not written; refusals of
// callers with a valid token are always written. Runs on both stores.
#include <string>

#include <gtest/gtest.h>

#include "controlplane/testing/server_test_fixture.h"

namespace controlplane {
namespace {

class AuditBudgetTest : public ServerTest {
 protected:
  static void SetUpTestSuite() {
    StartServer("audit-budget", 1000, "", [](ServerOptions& o) { o.audit_anonymous_burst = 3; });
  }
};

TEST_F(AuditBudgetTest, AnonymousRefusalsPastTheBudgetAreCountedNotWritten) {
  for (int i = 0; i < 10; ++i) {
    Reply r = Call("POST", "/v1/tenants", "", R"({"name":"anon"})",
                   {{"X-Request-Id", "anon-" + std::to_string(i)}});
    EXPECT_EQ(r.status, 401) << r.text;
  }
  // A bad token is no better than none.
  Call("POST", "/v1/tenants", "not-a-token", R"({"name":"anon"})", {{"X-Request-Id", "bad-token"}});
  // A valid token's refusal is written whatever the budget.
  Call("POST", "/v1/jobs/999999/cancel", Admin(), "", {{"X-Request-Id", "admin-refused"}});
  int anonymous = 0;
  bool admin_row = false;
  const Reply audit = Call("GET", "/v1/audit?limit=100", Admin());
  ASSERT_EQ(audit.status, 200) << audit.text;
  for (const auto& e : audit.body["entries"]) {
    if (e["actor"] == "anonymous") ++anonymous;
    if (e["request_id"] == "admin-refused") admin_row = true;
  }
  EXPECT_EQ(anonymous, 3);
  EXPECT_TRUE(admin_row);
  const std::string metrics = Call("GET", "/metrics", Admin()).text;
  EXPECT_NE(metrics.find("\nembody_audit_suppressed_total 8"), std::string::npos)
      << metrics.substr(0, 2000);
}

}  // namespace
}  // namespace controlplane
