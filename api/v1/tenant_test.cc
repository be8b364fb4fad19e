#include "api/v1/tenant.h"

#include <gtest/gtest.h>

namespace api::v1 {
namespace {

using nlohmann::json;

Tenant SampleTenant() {
  Tenant t;
  t.id = 7;
  t.name = "lab";
  t.weight = 2.5;
  t.quota.slots = 64;
  t.quota.max_priority = 0;
  t.quota.storage_bytes = int64_t{1} << 40;
  t.usage = {8, 2, 1, 12345};
  t.version = 3;
  t.created_ms = 1'767'322'800'123;
  t.updated_ms = 1'767'322'900'000;
  return t;
}

TEST(TenantViewTest, WritesEveryFieldWithNullForNoLimit) {
  EXPECT_EQ(ToJson(SampleTenant()).dump(),
            R"({"created_at":"2026-01-02T03:00:00.123Z","id":7,"name":"lab",)"
            R"("quota":{"max_priority":0,"nodes_per_job":null,"pending_jobs":null,)"
            R"("running_jobs":null,"slots":64,"storage_bytes":1099511627776},)"
            R"("updated_at":"2026-01-02T03:01:40.000Z",)"
            R"("usage":{"pending_jobs":1,"running_jobs":2,"slots_in_use":8,)"
            R"("storage_bytes":12345},"version":3,"weight":2.5})");
}

TEST(TenantViewTest, RoundTrips) {
  TenantList list{{SampleTenant(), Tenant{}}};
  list.tenants[1].name = "other";
  auto back = ParseTenantList(ToJson(list));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, list);
}

TEST(TenantViewTest, AMissingRequiredFieldIsNamed) {
  json j = ToJson(SampleTenant());
  j["quota"].erase("slots");
  auto r = ParseTenant(j);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), common::Code::kInvalidArgument);
  EXPECT_EQ(r.status().field(), "quota.slots");
}

TEST(TenantViewTest, AWrongTypeIsRefusedWithItsPath) {
  json list = ToJson(TenantList{{SampleTenant(), SampleTenant()}});
  list["tenants"][1]["usage"]["running_jobs"] = "2";
  auto r = ParseTenantList(list);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().field(), "tenants[1].usage.running_jobs");
  EXPECT_EQ(r.status().message(), "must be a 64-bit integer");

  json t = ToJson(SampleTenant());
  t["quota"]["slots"] = int64_t{1} << 40;  // past int: refused, not wrapped
  EXPECT_EQ(ParseTenant(t).status().field(), "quota.slots");
  t = ToJson(SampleTenant());
  t["created_at"] = "yesterday";
  EXPECT_EQ(ParseTenant(t).status().field(), "created_at");
  EXPECT_EQ(ParseTenant(json::array()).status().field(), "response");
}

TEST(TenantUsageViewTest, RoundTripsWithNullTokens) {
  TenantUsage u;
  u.tenant_id = 2;
  u.tenant = "lab";
  u.from = "2026-01-01";
  u.to = "2026-01-30";
  u.days = {{"2026-01-01", "gpu", 4, "ci", 7200.5}, {"2026-01-02", "cpu", std::nullopt,
                                                     std::nullopt, 60}};
  u.total_slot_seconds = 7260.5;
  u.cpu_slot_hours = 60.0 / 3600;
  u.gpu_slot_hours = 7200.5 / 3600;
  const json j = ToJson(u);
  EXPECT_TRUE(j["days"][1]["token_id"].is_null());
  EXPECT_TRUE(j["days"][1]["token_name"].is_null());
  auto back = ParseTenantUsage(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, u);

  json bad = j;
  bad["slot_hours"].erase("gpu");
  EXPECT_EQ(ParseTenantUsage(bad).status().field(), "slot_hours.gpu");
}

}  // namespace
}  // namespace api::v1
