#include "api/v1/audit.h"

#include <gtest/gtest.h>

namespace api::v1 {
namespace {

using nlohmann::json;

AuditEntry SampleAuditEntry() {
  AuditEntry e;
  e.id = 11;
  e.time_ms = 1'767'322'800'000;
  e.token_id = 4;
  e.actor = "ci";
  e.role = "member";
  e.tenant_id = 2;
  e.tenant = "lab";
  e.method = "POST";
  e.route = "/v1/jobs/{id}/cancel";
  e.path = "/v1/jobs/3/cancel";
  e.target = "job 3";
  e.status = 200;
  e.outcome = "ok";
  e.request_id = "r-1";
  return e;
}

TEST(AuditViewTest, WritesAnAnonymousEntryWithNulls) {
  AuditEntry anon = SampleAuditEntry();
  anon.token_id.reset();
  anon.tenant_id.reset();
  anon.actor = "anonymous";
  EXPECT_EQ(ToJson(anon).dump(),
            R"({"actor":"anonymous","id":11,"method":"POST","outcome":"ok",)"
            R"("path":"/v1/jobs/3/cancel","request_id":"r-1","role":"member",)"
            R"("route":"/v1/jobs/{id}/cancel","status":200,"target":"job 3","tenant":"lab",)"
            R"("tenant_id":null,"time":"2026-01-02T03:00:00.000Z","token_id":null})");
}

TEST(AuditViewTest, RoundTripsAPageWithAndWithoutACursor) {
  AuditEntry anon = SampleAuditEntry();
  anon.token_id.reset();
  AuditPage last{{SampleAuditEntry(), anon}, std::nullopt};
  AuditPage more{{SampleAuditEntry()}, "11"};
  for (const AuditPage& p : {last, more}) {
    const json j = ToJson(p);
    ASSERT_TRUE(j.contains("next_cursor"));
    auto back = ParseAuditPage(j);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, p);
  }
}

TEST(AuditViewTest, AWrongTypeOrAMissingFieldIsNamed) {
  json j = ToJson(AuditPage{{SampleAuditEntry(), SampleAuditEntry()}, std::nullopt});
  j["entries"][1]["status"] = "200";
  auto r = ParseAuditPage(j);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().field(), "entries[1].status");
  EXPECT_EQ(r.status().message(), "must be a 32-bit integer");
  json k = ToJson(AuditPage{{}, std::nullopt});
  k.erase("next_cursor");
  EXPECT_EQ(ParseAuditPage(k).status().field(), "next_cursor");
  json e = ToJson(SampleAuditEntry());
  e.erase("request_id");
  EXPECT_EQ(ParseAuditEntry(e).status().message(), "is required");
}

}  // namespace
}  // namespace api::v1
