// The stores' contract, continued from store_conformance.h (whose fixture and Backend concept
// this suite shares): tenants with unique names and versioned updates, tokens found by digest,
// scoped and revoked once, the audit log, fair-share history and daily usage, and what
// PostgreSQL refuses to store.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "controlplane/testing/store_conformance.h"

namespace controlplane::testing {

template <typename Backend>
class TenantStoreConformanceTest : public StoreConformanceTest<Backend> {};

TYPED_TEST_SUITE_P(TenantStoreConformanceTest);

TYPED_TEST_P(TenantStoreConformanceTest, TenantsHaveUniqueNamesAndVersionedUpdates) {
  auto uow = this->Begin();
  service::TenantRecord t;
  t.name = "a";
  t.weight = 2.5;
  t.quota.slots = 8;
  t.quota.pending_jobs = 3;
  t.quota.max_priority = 40;
  t.quota.storage_bytes = int64_t{5} << 40;  // past 32 bits
  const int64_t a = *uow->tenants().CreateTenant(t, this->kNow);
  t.name = "b";
  t.quota = {};
  const int64_t b = *uow->tenants().CreateTenant(t, this->kNow);
  ASSERT_TRUE(uow->Commit().ok());
  uow = this->Begin();
  auto got = **uow->tenants().GetTenant(a, true);
  EXPECT_EQ(got.name, "a");
  EXPECT_EQ(got.weight, 2.5);
  EXPECT_EQ(got.quota.slots, 8);
  EXPECT_EQ(got.quota.pending_jobs, 3);
  EXPECT_FALSE(got.quota.running_jobs || got.quota.nodes_per_job);
  EXPECT_EQ(got.quota.max_priority, 40);
  EXPECT_EQ(got.quota.storage_bytes, int64_t{5} << 40);
  EXPECT_EQ(got.version, 1);
  EXPECT_EQ(got.created_ms, this->kNow);
  got.quota.running_jobs = 0;
  got.quota.max_priority.reset();
  got.quota.storage_bytes.reset();
  got.weight = 0.1;
  got.version = 99;  // not written: the store bumps it
  ASSERT_TRUE(uow->tenants().UpdateTenant(got, this->kNow + 7).ok());
  auto after = **uow->tenants().GetTenant(a, false);
  EXPECT_EQ(after.version, 2);
  EXPECT_EQ(after.quota.running_jobs, 0);
  EXPECT_FALSE(after.quota.max_priority);
  EXPECT_FALSE(after.quota.storage_bytes);
  EXPECT_EQ(after.weight, 0.1);
  EXPECT_EQ(after.updated_ms, this->kNow + 7);
  EXPECT_EQ(after.created_ms, this->kNow);
  auto listed = *uow->tenants().ListTenants(std::nullopt);
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].id, a);
  ASSERT_EQ(uow->tenants().ListTenants(b)->size(), 1u);
  EXPECT_FALSE(uow->tenants().GetTenant(b + 1000, false)->has_value());
  auto usage = *uow->tenants().UsageNow(b);
  EXPECT_EQ(usage.slots_in_use + usage.running_jobs + usage.pending_jobs, 0);
  ASSERT_TRUE(uow->Commit().ok());
  uow = this->Begin();
  after.name = "b";
  auto taken = uow->tenants().UpdateTenant(after, this->kNow);
  EXPECT_EQ(taken.code(), common::Code::kAlreadyExists);
  EXPECT_EQ(taken.field(), "name");
}

TYPED_TEST_P(TenantStoreConformanceTest, TokensAreFoundByDigestScopedAndRevokedOnce) {
  const int64_t a = this->AddTenant("a"), b = this->AddTenant("b");
  const int64_t node = this->AddNode("n1");
  auto uow = this->Begin();
  auto& ts = uow->tenants();
  service::NewToken t{"aa11", a, "member", "alice", std::nullopt, 0, 0, this->kNow};
  const int64_t alice = *ts.CreateToken(t);
  t = {"bb22", b, "viewer", "bob", this->kNow + 100, 0, alice, this->kNow};
  const int64_t bob = *ts.CreateToken(t);
  t = {"cc33", a, "node", "node n1", std::nullopt, node, 0, this->kNow};
  const int64_t cred = *ts.CreateToken(t);
  ASSERT_TRUE(uow->Commit().ok());

  uow = this->Begin();
  auto& tokens = uow->tenants();
  auto m = **tokens.FindToken("bb22");
  EXPECT_EQ(m.principal.token_id, bob);
  EXPECT_EQ(m.principal.tenant_id, b);
  EXPECT_EQ(m.principal.tenant, "b");
  EXPECT_EQ(m.principal.role, "viewer");
  EXPECT_EQ(m.principal.token_name, "bob");
  EXPECT_EQ(m.sha256_hex, "bb22");
  EXPECT_EQ(m.expires_ms, this->kNow + 100);
  EXPECT_FALSE(m.revoked_ms);
  EXPECT_EQ((**tokens.FindToken("cc33")).principal.node_id, node);
  EXPECT_EQ((**tokens.GetToken(cred, a)).node_id, node);
  EXPECT_FALSE(tokens.FindToken("dd44")->has_value());
  auto of_a = *tokens.ListTokens(a);
  ASSERT_EQ(of_a.size(), 2u);
  EXPECT_EQ(of_a[0].id, alice);
  EXPECT_EQ(of_a[1].node_id, node);
  EXPECT_EQ(tokens.ListTokens(std::nullopt)->size(), 3u);
  auto got = **tokens.GetToken(bob, b);
  EXPECT_EQ(got.created_by, alice);
  EXPECT_EQ(got.tenant, "b");
  EXPECT_EQ(got.created_ms, this->kNow);
  EXPECT_FALSE(tokens.GetToken(bob, a)->has_value());

  EXPECT_TRUE(*tokens.HasLiveNodeToken(node, this->kNow));
  ASSERT_TRUE(tokens.RevokeToken(alice, this->kNow + 1).ok());
  ASSERT_TRUE(tokens.RevokeToken(alice, this->kNow + 2).ok());
  EXPECT_EQ((**tokens.GetToken(alice, std::nullopt)).revoked_ms, this->kNow + 1);
  ASSERT_TRUE(tokens.RevokeNodeTokens(node, this->kNow + 3).ok());
  EXPECT_FALSE(*tokens.HasLiveNodeToken(node, this->kNow));
  EXPECT_EQ((**tokens.FindToken("cc33")).revoked_ms, this->kNow + 3);
  // A node holds one live credential at most; an expired one is not live but still counts.
  t = {"ee55", a, "node", "node n1", this->kNow + 10, node, 0, this->kNow};
  ASSERT_TRUE(tokens.CreateToken(t).ok());
  EXPECT_TRUE(*tokens.HasLiveNodeToken(node, this->kNow + 9));
  EXPECT_FALSE(*tokens.HasLiveNodeToken(node, this->kNow + 10));
  ASSERT_TRUE(uow->Commit().ok());
  uow = this->Begin();
  t = {"ff66", a, "node", "node n1", std::nullopt, node, 0, this->kNow};
  EXPECT_EQ(uow->tenants().CreateToken(t).status().code(), common::Code::kAlreadyExists);
  uow.reset();  // the failed unit ends before the next begins
  uow = this->Begin();
  t = {"aa11", b, "member", "same digest", std::nullopt, 0, 0, this->kNow};
  EXPECT_EQ(uow->tenants().CreateToken(t).status().code(), common::Code::kAlreadyExists);
}

// A cluster-admin's token belongs to some tenant (the bootstrap one), but its actions are not
// that tenant's to read: a tenant sees those on its own resources only.
TYPED_TEST_P(TenantStoreConformanceTest, ATenantSeesAClusterAdminsActionsOnlyOnItsResources) {
  const int64_t a = this->AddTenant("a"), b = this->AddTenant("b");
  auto uow = this->Begin();
  auto row = [&](int64_t target, const std::string& path) {
    service::AuditRecord r;
    r.time_ms = this->kNow;
    r.token_id = 1;
    r.actor = "admin";
    r.role = "cluster-admin";
    r.tenant_id = a;
    r.target_tenant_id = target;
    r.method = "POST";
    r.route = "/v1/tenants";
    r.path = path;
    r.status = 201;
    r.outcome = "ok";
    EXPECT_TRUE(uow->audit().Append(r).ok());
  };
  row(b, "/on-b");
  row(0, "/on-nobody");
  row(a, "/on-a");
  auto paths = [&](int64_t tenant) {
    service::AuditQuery q;
    q.tenant_id = tenant;
    std::vector<std::string> out;
    for (const auto& r : *uow->audit().List(q)) out.push_back(r.path);
    return out;
  };
  EXPECT_EQ(paths(a), (std::vector<std::string>{"/on-a"}));
  EXPECT_EQ(paths(b), (std::vector<std::string>{"/on-b"}));
}

TYPED_TEST_P(TenantStoreConformanceTest, TheAuditLogIsNewestFirstByOrAboutATenant) {
  const int64_t a = this->AddTenant("a"), b = this->AddTenant("b");
  auto uow = this->Begin();
  auto row = [&](int64_t tenant, int64_t target, const std::string& path) {
    service::AuditRecord r;
    r.time_ms = this->kNow;
    r.token_id = tenant ? 7 : 0;
    r.actor = tenant ? "someone" : "anonymous";
    r.role = "member";
    r.tenant_id = tenant;
    r.target_tenant_id = target;
    r.method = "POST";
    r.route = "/v1/jobs";
    r.path = path;
    r.target = "job 1";
    r.status = 201;
    r.outcome = "ok";
    r.request_id = "r-" + path;
    EXPECT_TRUE(uow->audit().Append(r).ok());
  };
  row(a, 0, "/1");
  row(b, a, "/2");  // about a
  row(0, 0, "/3");  // anonymous
  row(b, 0, "/4");
  service::AuditQuery q;
  auto paths = [&] {
    std::vector<std::string> out;
    for (const auto& r : *uow->audit().List(q)) out.push_back(r.path);
    return out;
  };
  EXPECT_EQ(paths(), (std::vector<std::string>{"/4", "/3", "/2", "/1"}));
  q.tenant_id = a;
  EXPECT_EQ(paths(), (std::vector<std::string>{"/2", "/1"}));
  auto rows = *uow->audit().List(q);
  EXPECT_EQ(rows[0].tenant, "b");
  EXPECT_EQ(rows[0].target_tenant_id, a);
  EXPECT_EQ(rows[0].request_id, "r-/2");
  EXPECT_EQ(rows[0].status, 201);
  q.before_id = rows[0].id;
  EXPECT_EQ(paths(), (std::vector<std::string>{"/1"}));
  q = {};
  q.limit = 1;
  EXPECT_EQ(paths(), (std::vector<std::string>{"/4"}));
  q.before_id = (*uow->audit().List(q))[0].id;
  q.limit = 1;
  auto anon = *uow->audit().List(q);
  ASSERT_EQ(anon.size(), 1u);
  EXPECT_EQ(anon[0].tenant, "");
  EXPECT_EQ(anon[0].tenant_id, 0);
  EXPECT_EQ(anon[0].token_id, 0);
  // A row is amended to the call's final result; nothing else of it changes.
  const int64_t first = rows[1].id;
  service::AuditRecord final = rows[1];
  final.status = 500;
  final.outcome = "internal";
  final.target = "job 2";
  final.target_tenant_id = b;
  final.path = "/changed";
  ASSERT_TRUE(uow->audit().Amend(first, final).ok());
  q = {};
  q.before_id = first + 1;
  q.limit = 1;
  auto amended = *uow->audit().List(q);
  ASSERT_EQ(amended.size(), 1u);
  EXPECT_EQ(amended[0].id, first);
  EXPECT_EQ(amended[0].status, 500);
  EXPECT_EQ(amended[0].outcome, "internal");
  EXPECT_EQ(amended[0].target, "job 2");
  EXPECT_EQ(amended[0].target_tenant_id, b);
  EXPECT_EQ(amended[0].path, "/1");
}

// Retention: audit rows before a time and daily usage rows before a day go, a bounded number
// at a time, oldest first; newer ones stay.
TYPED_TEST_P(TenantStoreConformanceTest, OldAuditAndUsageRowsAreDeletedInBoundedSteps) {
  const int64_t a = this->AddTenant("a");
  auto uow = this->Begin();
  for (int i = 0; i < 5; ++i) {
    service::AuditRecord r;
    r.time_ms = this->kNow + i * 1000;
    r.actor = "anonymous";
    r.method = "POST";
    r.route = "/v1/jobs";
    r.path = "/" + std::to_string(i);
    r.status = 401;
    r.outcome = "unauthenticated";
    ASSERT_TRUE(uow->audit().Append(r).ok());
  }
  EXPECT_EQ(*uow->audit().DeleteBefore(this->kNow + 3000, 2), 2);
  EXPECT_EQ(*uow->audit().DeleteBefore(this->kNow + 3000, 2), 1);
  EXPECT_EQ(*uow->audit().DeleteBefore(this->kNow + 3000, 2), 0);
  std::vector<std::string> left;
  for (const auto& r : *uow->audit().List({})) left.push_back(r.path);
  EXPECT_EQ(left, (std::vector<std::string>{"/4", "/3"}));

  auto& fs = uow->fair_share();
  ASSERT_TRUE(fs.AddDailyUsage({{a, 0, "2026-01-01", "cpu", 1},
                                {a, 0, "2026-01-02", "cpu", 2},
                                {a, 0, "2026-01-03", "cpu", 3}})
                  .ok());
  EXPECT_EQ(*fs.DeleteDailyUsageBefore("2026-01-03", 10), 2);
  auto rest = *fs.ListDailyUsage(std::nullopt, "2026-01-01", "2026-01-31");
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].day, "2026-01-03");
  ASSERT_TRUE(uow->Commit().ok());
}

TYPED_TEST_P(TenantStoreConformanceTest, FairShareHistoryAndDailyUsage) {
  const int64_t a = this->AddTenant("a"), b = this->AddTenant("b");
  auto uow = this->Begin();
  auto& fs = uow->fair_share();
  auto empty = *fs.Load();
  EXPECT_TRUE(empty.usage.empty());
  EXPECT_FALSE(empty.accrued_ms);
  service::FairShareState s;
  s.usage[a] = {10.5, 0};
  s.usage[b] = {1, 2};
  s.accrued_ms = this->kNow;
  ASSERT_TRUE(fs.Save(s).ok());
  s.usage.erase(b);  // replaces the tenants it names, keeps the others
  s.usage[a] = {0.25, 3};
  s.accrued_ms.reset();  // and the time only when it has one
  ASSERT_TRUE(fs.Save(s).ok());
  auto loaded = *fs.Load();
  EXPECT_EQ(loaded.usage[a], (service::SlotSeconds{0.25, 3}));
  EXPECT_EQ(loaded.usage[b], (service::SlotSeconds{1, 2}));
  EXPECT_EQ(loaded.accrued_ms, this->kNow);

  ASSERT_TRUE(fs.AddDailyUsage({{b, 0, "2026-01-02", "cpu", 5},
                                {a, 4, "2026-01-02", "gpu", 1},
                                {a, 4, "2026-01-02", "cpu", 2},
                                {a, 0, "2026-01-01", "cpu", 3}})
                  .ok());
  ASSERT_TRUE(fs.AddDailyUsage({{a, 4, "2026-01-02", "cpu", 0.5}}).ok());
  ASSERT_TRUE(fs.AddDailyUsage({}).ok());
  using service::DailyUsage;
  EXPECT_EQ(*fs.ListDailyUsage(std::nullopt, "2026-01-01", "2026-01-31"),
            (std::vector<DailyUsage>{{a, 0, "2026-01-01", "cpu", 3},
                                     {a, 4, "2026-01-02", "cpu", 2.5},
                                     {a, 4, "2026-01-02", "gpu", 1},
                                     {b, 0, "2026-01-02", "cpu", 5}}));
  EXPECT_EQ(*fs.ListDailyUsage(b, "2026-01-01", "2026-01-02"),
            (std::vector<DailyUsage>{{b, 0, "2026-01-02", "cpu", 5}}));
  EXPECT_EQ(fs.ListDailyUsage(a, "2026-01-02", "2026-01-02")->size(), 2u);
  EXPECT_TRUE(fs.ListDailyUsage(a, "2026-01-03", "2026-02-01")->empty());
  EXPECT_EQ(fs.AddDailyUsage({{a, 0, "2026-01-01", "tpu", 1}}).code(), common::Code::kInternal);
}

TYPED_TEST_P(TenantStoreConformanceTest, BadTextAndBrokenReferencesAreRefused) {
  const int64_t a = this->AddTenant("a");
  {
    auto uow = this->Begin();
    service::NewJob job = this->Job(a, "spec stays valid");
    job.name = "bad \xc3\x28 name";
    auto bad = uow->jobs().Insert(job);
    EXPECT_EQ(bad.status().code(), common::Code::kInvalidArgument);
  }
  {
    auto uow = this->Begin();
    const int64_t job = *uow->jobs().Insert(this->Job(a, "ok"));
    auto nul = uow->events().Append(job, this->kNow, "note", {{"text", std::string("a\0b", 3)}});
    EXPECT_EQ(nul.status().code(), common::Code::kInvalidArgument);
  }
  {
    auto uow = this->Begin();
    EXPECT_EQ(uow->jobs().Insert(this->Job(a + 1000, "orphan")).status().code(),
              common::Code::kInternal);
  }
  {
    auto uow = this->Begin();
    EXPECT_EQ(uow->events().Append(424242, this->kNow, "note", {}).status().code(),
              common::Code::kInternal);
  }
  auto uow = this->Begin();
  service::JobQuery all;
  EXPECT_TRUE(uow->jobs().List(all)->empty());
}

REGISTER_TYPED_TEST_SUITE_P(TenantStoreConformanceTest, TenantsHaveUniqueNamesAndVersionedUpdates,
                            TokensAreFoundByDigestScopedAndRevokedOnce,
                            TheAuditLogIsNewestFirstByOrAboutATenant,
                            ATenantSeesAClusterAdminsActionsOnlyOnItsResources,
                            OldAuditAndUsageRowsAreDeletedInBoundedSteps, FairShareHistoryAndDailyUsage,
                            BadTextAndBrokenReferencesAreRefused);

}  // namespace controlplane::testing
