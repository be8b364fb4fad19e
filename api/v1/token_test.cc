#include "api/v1/token.h"

#include <gtest/gtest.h>

namespace api::v1 {
namespace {

using nlohmann::json;

Token SampleToken() {
  Token t;
  t.id = 4;
  t.tenant_id = 2;
  t.tenant = "lab";
  t.role = "member";
  t.name = "ci";
  t.created_ms = 1'767'322'800'000;
  t.expires_ms = 1'798'761'600'000;
  return t;
}

TEST(TokenViewTest, WritesNullTimesAndLeavesOutNodeIdOfAPerson) {
  EXPECT_EQ(ToJson(SampleToken()).dump(),
            R"({"created_at":"2026-01-02T03:00:00.000Z","expires_at":"2027-01-01T00:00:00.000Z",)"
            R"("id":4,"name":"ci","revoked_at":null,"role":"member","tenant":"lab",)"
            R"("tenant_id":2})");
  Token node = SampleToken();
  node.role = "node";
  node.node_id = 9;
  EXPECT_EQ(ToJson(node)["node_id"], 9);
}

TEST(TokenViewTest, RoundTrips) {
  Token revoked = SampleToken();
  revoked.revoked_ms = 1'767'400'000'000;
  revoked.expires_ms.reset();
  Token node = SampleToken();
  node.node_id = 3;
  TokenList list{{SampleToken(), revoked, node}};
  auto back = ParseTokenList(ToJson(list));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, list);

  CreatedToken made{SampleToken(), "00ff"};
  const json j = ToJson(made);
  EXPECT_EQ(j["token"], "00ff");
  auto made_back = ParseCreatedToken(j);
  ASSERT_TRUE(made_back.ok()) << made_back.status().ToString();
  EXPECT_EQ(*made_back, made);
  // A listed token has no secret: not a CreatedToken.
  EXPECT_EQ(ParseCreatedToken(ToJson(SampleToken())).status().field(), "token");
}

TEST(TokenViewTest, AbsentNodeIdIsZeroButNullTimesAreRequired) {
  json j = ToJson(SampleToken());
  ASSERT_FALSE(j.contains("node_id"));
  EXPECT_EQ(ParseToken(j)->node_id, 0);
  j.erase("revoked_at");  // nullable, not optional: the schema requires it
  EXPECT_EQ(ParseToken(j).status().field(), "revoked_at");
}

TEST(TokenViewTest, AWrongTypeIsRefusedWithItsPath) {
  json j = ToJson(TokenList{{SampleToken()}});
  j["tokens"][0]["expires_at"] = 12;
  auto r = ParseTokenList(j);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().field(), "tokens[0].expires_at");
  EXPECT_EQ(r.status().message(), "must be an RFC 3339 time in UTC or null");
  json n = ToJson(SampleToken());
  n["node_id"] = 1.5;
  EXPECT_EQ(ParseToken(n).status().field(), "node_id");
}

TEST(WhoAmIViewTest, RoundTripsWithAndWithoutNode) {
  WhoAmI person{1, "admin", 1, "default", "cluster-admin", 0};
  EXPECT_EQ(ToJson(person).dump(),
            R"({"name":"admin","role":"cluster-admin","tenant":"default","tenant_id":1,)"
            R"("token_id":1})");
  WhoAmI node{5, "node n1", 1, "default", "node", 3};
  for (const WhoAmI& w : {person, node}) {
    auto back = ParseWhoAmI(ToJson(w));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, w);
  }
  json bad = ToJson(person);
  bad["role"] = nullptr;
  EXPECT_EQ(ParseWhoAmI(bad).status().field(), "role");
}

}  // namespace
}  // namespace api::v1
