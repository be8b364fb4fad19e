// Authentication through the principal cache on the in-memory twin (label unit): a live token is
// read from the database once, and every change that affects what Authenticate answers (a token
// revoked, a node's credentials replaced, a tenant renamed, a token expiring) is refused or
// seen from the very next call, through the services that make those changes. The listener that
// clears the cache for other replicas' changes is tested on PostgreSQL
// (db/principal_listener_pg_test.cc).
#include "controlplane/service/principal_cache.h"

#include <gtest/gtest.h>

#include "common/crypto.h"
#include "controlplane/service/auth.h"
#include "controlplane/service/tenants_service.h"
#include "controlplane/service/tokens_service.h"
#include "controlplane/testing/memory_service_fixture.h"

namespace controlplane::service {
namespace {

using common::Code;

class PrincipalCacheTest : public testing::NodeServiceFixture {
 protected:
  void SetUp() override {
    NodeServiceFixture::SetUp();
    SetUpNodeService(1000);
    cache_.SetEnabled(true);
    admin_ = AddPerson(a_, "cluster-admin", &admin_secret_);
    member_secret_ = Secret(a_, "member");
  }

  // A new token of `role` in `tenant`, its secret; `expires_ms` 0: none.
  std::string Secret(int64_t tenant, const std::string& role, int64_t expires_ms = 0) {
    const std::string secret = common::RandomToken();
    auto uow = Begin();
    NewToken t;
    t.sha256_hex = common::Sha256Hex(secret);
    t.tenant_id = tenant;
    t.role = role;
    t.name = role + "-" + secret.substr(0, 6);
    if (expires_ms) t.expires_ms = expires_ms;
    t.now_ms = now_.load();
    EXPECT_TRUE(uow->tenants().CreateToken(t).ok());
    EXPECT_TRUE(uow->Commit().ok());
    return secret;
  }

  Result<Principal> Auth(const std::string& secret) {
    return Authenticate(watched_, &cache_, "Bearer " + secret, now_.load());
  }
  uint64_t Misses() { return cache_.GetStats().misses; }

  // Authenticates twice and checks that the second call was answered from the cache.
  Principal Warm(const std::string& secret) {
    auto p = Auth(secret);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    const uint64_t misses = Misses();
    auto again = Auth(secret);
    EXPECT_TRUE(again.ok());
    EXPECT_EQ(Misses(), misses) << "the second call read the database";
    return p.ok() ? *p : Principal{};
  }

  PrincipalCache cache_;
  PrincipalWatchedDatabase watched_{db_, cache_};
  Principal admin_;
  std::string admin_secret_, member_secret_;
};

TEST_F(PrincipalCacheTest, ALiveTokenIsReadOnceAndResolvesAsWithoutTheCache) {
  const Principal cached = Warm(member_secret_);
  auto plain = Authenticate(db_, "Bearer " + member_secret_, now_.load());
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(cached.token_id, plain->token_id);
  EXPECT_EQ(cached.token_name, plain->token_name);
  EXPECT_EQ(cached.tenant_id, plain->tenant_id);
  EXPECT_EQ(cached.tenant, plain->tenant);
  EXPECT_EQ(cached.role, plain->role);
  EXPECT_EQ(cached.node_id, plain->node_id);
  EXPECT_EQ(cache_.GetStats().entries, 1u);
}

TEST_F(PrincipalCacheTest, ARevokedTokenIsRefusedFromTheNextCall) {
  const Principal p = Warm(member_secret_);
  TokensService tokens(watched_, clock());
  ASSERT_TRUE(tokens.Revoke(admin_, p.token_id).ok());
  auto after = Auth(member_secret_);
  EXPECT_EQ(after.status().code(), Code::kUnauthenticated);
  EXPECT_EQ(after.status().message(), "token revoked");
  // Revoked tokens are not kept: every later call reads and refuses it.
  const uint64_t misses = Misses();
  EXPECT_FALSE(Auth(member_secret_).ok());
  EXPECT_EQ(Misses(), misses + 1);
}

TEST_F(PrincipalCacheTest, ATokenRevokingItselfIsRefusedFromTheNextCall) {
  const Principal p = Warm(member_secret_);
  TokensService tokens(watched_, clock());
  ASSERT_TRUE(tokens.Revoke(p, p.token_id).ok());
  EXPECT_EQ(Auth(member_secret_).status().message(), "token revoked");
}

TEST_F(PrincipalCacheTest, AnExpiringTokenIsRefusedFromItsExpiryWithoutAnyChange) {
  const std::string secret = Secret(a_, "member", now_.load() + 1000);
  Warm(secret);
  now_ += 999;
  EXPECT_TRUE(Auth(secret).ok());
  now_ += 1;
  auto expired = Auth(secret);
  EXPECT_EQ(expired.status().code(), Code::kUnauthenticated);
  EXPECT_EQ(expired.status().message(), "token expired");
}

TEST_F(PrincipalCacheTest, ARenamedTenantIsSeenFromTheNextCall) {
  EXPECT_EQ(Warm(member_secret_).tenant, "a");
  TenantsService tenants(watched_, clock());
  ASSERT_TRUE(tenants.Patch(admin_, a_, R"({"name":"a2"})", "").ok());
  auto p = Auth(member_secret_);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->tenant, "a2");
}

TEST_F(PrincipalCacheTest, AReplacedNodeCredentialIsRefusedFromTheNextCall) {
  NodeService nodes(watched_, *files_, 1000, clock(), nullptr);
  auto reg = nodes.Register(join_, {"n1", "127.0.0.1", "", 2, 0, {}, {}});
  ASSERT_TRUE(reg.ok()) << reg.status().ToString();
  const std::string old_credential = reg->node_token;
  EXPECT_EQ(Warm(old_credential).node_id, reg->node_id);
  {
    auto uow = Begin();
    ASSERT_TRUE(uow->nodes().SetState(reg->node_id, "DOWN").ok());
    ASSERT_TRUE(uow->Commit().ok());
  }
  // Reset by an operator, the join token claims the node again: its old credential is revoked, a
  // new one issued.
  ASSERT_TRUE(nodes.Reset(admin_, reg->node_id).ok());
  auto again = nodes.Register(join_, {"n1", "127.0.0.1", "", 2, 0, {}, {}});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(Auth(old_credential).status().message(), "token revoked");
  EXPECT_EQ(Auth(again->node_token)->node_id, reg->node_id);
}

TEST_F(PrincipalCacheTest, ANewTokenWorksAtOnceAndUnknownOnesAreNeverKept) {
  EXPECT_EQ(Auth("0123456789abcdef").status().message(), "unknown token");
  EXPECT_EQ(cache_.GetStats().entries, 0u);
  // Made without going through the watched database: found on its first use all the same.
  EXPECT_TRUE(Auth(Secret(a_, "viewer")).ok());
}

TEST_F(PrincipalCacheTest, ARollbackOrAReadLeavesTheCacheAlone) {
  Warm(member_secret_);
  {
    auto uow = watched_.Begin();
    ASSERT_TRUE(uow.ok());
    ASSERT_TRUE((*uow)->tenants().ListTokens(std::nullopt).ok());
    ASSERT_TRUE((*uow)->Commit().ok());
  }
  EXPECT_EQ(cache_.GetStats().clears, 0u);
  const uint64_t misses = Misses();
  EXPECT_TRUE(Auth(member_secret_).ok());
  EXPECT_EQ(Misses(), misses);
}

TEST_F(PrincipalCacheTest, WithTheCacheOffEveryCallReadsTheDatabase) {
  Warm(member_secret_);
  cache_.SetEnabled(false);
  EXPECT_EQ(cache_.GetStats().entries, 0u);
  const uint64_t misses = Misses();
  EXPECT_TRUE(Auth(member_secret_).ok());
  EXPECT_TRUE(Auth(member_secret_).ok());
  EXPECT_EQ(Misses(), misses + 2);
  EXPECT_EQ(cache_.GetStats().entries, 0u);
}

// A lookup that read the database before a change and finishes after it must not put back what
// it read.
TEST(PrincipalCacheEpochTest, ALookupThatRacedWithAClearIsNotKept) {
  PrincipalCache cache;
  cache.SetEnabled(true);
  TokenMatch m;
  m.principal.token_id = 7;
  uint64_t epoch = 0;
  EXPECT_FALSE(cache.Get("d", &epoch).has_value());
  cache.Clear();  // the change commits while the lookup is reading
  cache.Put("d", m, epoch);
  EXPECT_FALSE(cache.Get("d", &epoch).has_value());
  cache.Put("d", m, epoch);
  auto kept = cache.Get("d", &epoch);
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->principal.token_id, 7);
  // Turning the cache off (its listener lost) drops entries and races the same way.
  cache.SetEnabled(false);
  cache.SetEnabled(true);
  cache.Put("d", m, epoch);
  EXPECT_FALSE(cache.Get("d", &epoch).has_value());
}

TEST(PrincipalCacheEpochTest, HoldsNoMoreThanItsBound) {
  PrincipalCache cache(2);
  cache.SetEnabled(true);
  uint64_t epoch = 0;
  cache.Get("x", &epoch);
  for (const char* d : {"a", "b", "c"}) cache.Put(d, TokenMatch{}, epoch);
  EXPECT_EQ(cache.GetStats().entries, 2u);
}

}  // namespace
}  // namespace controlplane::service
