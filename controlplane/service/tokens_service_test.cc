// TokensService on the in-memory twin (label unit): a token's secret is shown once and only its
// digest is kept; it expires and is revoked from the next request on; a tenant-admin grants no
// role above its own and acts on no other tenant.
#include "controlplane/service/tokens_service.h"

#include <gtest/gtest.h>

#include "common/crypto.h"
#include "common/time_util.h"
#include "controlplane/testing/memory_service_fixture.h"

namespace controlplane::service {
namespace {

using common::Code;

class TokensServiceTest : public testing::MemoryServiceTest {
 protected:
  void SetUp() override {
    MemoryServiceTest::SetUp();
    a_ = AddTenant("a");
    b_ = AddTenant("b");
    admin_ = AddPerson(a_, "tenant-admin");
  }
  TokensService Tokens() { return TokensService(db_, clock()); }
  common::Status AuthStatus(const std::string& secret) {
    return Authenticate(db_, "Bearer " + secret, now_.load()).status();
  }
  int64_t a_ = 0, b_ = 0;
  Principal admin_;
};

TEST_F(TokensServiceTest, TheSecretIsReturnedOnceAndOnlyItsDigestIsStored) {
  auto tokens = Tokens();
  auto made = tokens.Create(admin_, R"({"role":"member","name":"ci"})");
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  const std::string secret = made->secret;
  EXPECT_EQ(made->token.role, "member");
  EXPECT_EQ(made->token.tenant_id, a_);
  auto p = Authenticate(db_, "Bearer " + secret, now_.load());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->role, "member");
  EXPECT_EQ(p->tenant_id, a_);
  EXPECT_EQ(p->token_name, "ci");
  auto uow = Begin();
  EXPECT_FALSE(uow->tenants().FindToken(secret)->has_value());
  EXPECT_TRUE(uow->tenants().FindToken(common::Sha256Hex(secret))->has_value());
  uow.reset();
  auto listed = tokens.List(admin_, 0);
  ASSERT_TRUE(listed.ok());
  // A listing's entries are api::v1::Token, which carries no secret.
  ASSERT_FALSE(listed->tokens.empty());
  for (const auto& t : listed->tokens) EXPECT_FALSE(api::v1::ToJson(t).contains("token"));
}

TEST_F(TokensServiceTest, ATenantAdminGrantsNoRoleAboveItsOwnAndNoOtherTenant) {
  auto tokens = Tokens();
  EXPECT_EQ(tokens.Create(admin_, R"({"role":"cluster-admin","name":"x"})").status().code(),
            Code::kPermissionDenied);
  EXPECT_EQ(tokens.Create(admin_, R"({"role":"agent","name":"x"})").status().code(),
            Code::kPermissionDenied);
  EXPECT_EQ(tokens.Create(admin_, R"({"role":"node","name":"x"})").status().code(),
            Code::kPermissionDenied);
  auto other = tokens.Create(
      admin_, R"({"role":"viewer","name":"x","tenant_id":)" + std::to_string(b_) + "}");
  EXPECT_EQ(other.status().code(), Code::kNotFound);  // another tenant does not exist for it
  EXPECT_TRUE(tokens.Create(admin_, R"({"role":"tenant-admin","name":"peer"})").ok());
  const Principal member = AddPerson(a_, "member");
  EXPECT_EQ(tokens.Create(member, R"({"role":"viewer","name":"x"})").status().code(),
            Code::kPermissionDenied);
  // A cluster-admin grants anything anywhere, and alone the join role.
  const Principal root = AddPerson(b_, "cluster-admin");
  EXPECT_TRUE(
      tokens
          .Create(root, R"({"role":"agent","name":"join","tenant_id":)" + std::to_string(a_) + "}")
          .ok());
  EXPECT_EQ(tokens.Create(root, R"({"role":"agent","name":"x","tenant_id":999})").status().code(),
            Code::kNotFound);
  auto listed = tokens.List(admin_, 0);
  ASSERT_TRUE(listed.ok());
  for (const auto& t : listed->tokens) {
    EXPECT_EQ(t.tenant_id, a_);
    EXPECT_NE(t.role, "agent");  // machine credentials are the operator's
  }
  EXPECT_TRUE(tokens.List(admin_, b_)->tokens.empty());
}

TEST_F(TokensServiceTest, ATokenExpiresAndIsRevokedFromTheNextRequestOn) {
  auto tokens = Tokens();
  const std::string at = common::FormatTimeMillis(now_.load() + 60'000);
  auto made =
      tokens.Create(admin_, R"({"role":"viewer","name":"short","expires_at":")" + at + "\"}");
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  const std::string secret = made->secret;
  EXPECT_TRUE(AuthStatus(secret).ok());
  now_ += 60'000;
  EXPECT_EQ(AuthStatus(secret).message(), "token expired");
  EXPECT_EQ(tokens
                .Create(admin_, R"({"role":"viewer","name":"old","expires_at":")" +
                                    common::FormatTimeMillis(now_.load() - 1000) + "\"}")
                .status()
                .field(),
            "expires_at");

  auto kept = tokens.Create(admin_, R"({"role":"member","name":"kept"})");
  const std::string kept_secret = kept->secret;
  const int64_t kept_id = kept->token.id;
  auto revoked = tokens.Revoke(admin_, kept_id);
  ASSERT_TRUE(revoked.ok()) << revoked.status().ToString();
  EXPECT_TRUE(revoked->revoked_ms.has_value());
  EXPECT_EQ(AuthStatus(kept_secret).message(), "token revoked");
}

TEST_F(TokensServiceTest, RevokingIsBoundByTheSameRulesAsGranting) {
  auto tokens = Tokens();
  std::string root_secret;
  const Principal root = AddPerson(a_, "cluster-admin", &root_secret);
  const Principal theirs = AddPerson(b_, "member");
  // Another tenant's token is not found; a role above the caller's is not the caller's to revoke.
  EXPECT_EQ(tokens.Revoke(admin_, theirs.token_id).status().code(), Code::kNotFound);
  EXPECT_EQ(tokens.Revoke(admin_, root.token_id).status().code(), Code::kPermissionDenied);
  EXPECT_TRUE(AuthStatus(root_secret).ok());
  // Anyone may revoke their own.
  std::string own_secret;
  const Principal viewer = AddPerson(a_, "viewer", &own_secret);
  EXPECT_TRUE(tokens.Revoke(viewer, viewer.token_id).ok());
  EXPECT_EQ(AuthStatus(own_secret).message(), "token revoked");
  EXPECT_EQ(tokens.Revoke(AddPerson(a_, "agent"), admin_.token_id).status().code(),
            Code::kPermissionDenied);
  EXPECT_TRUE(tokens.Revoke(root, theirs.token_id).ok());
}

}  // namespace
}  // namespace controlplane::service
