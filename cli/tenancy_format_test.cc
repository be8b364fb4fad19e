#include "cli/tenancy_format.h"

#include <gtest/gtest.h>

#include "common/time_util.h"

namespace cli {
namespace {

using nlohmann::json;

TEST(TenancyFormatTest, TenantsShowUsageAgainstQuota) {
  // Read as the CLI reads the server's reply: through the view's codec.
  auto reply = api::v1::ParseTenantList(json::parse(R"({"tenants":[
    {"id":1,"name":"default","weight":1.0,
     "quota":{"slots":null,"running_jobs":null,"pending_jobs":null,"nodes_per_job":null,
              "max_priority":null,"storage_bytes":null},
     "usage":{"slots_in_use":0,"running_jobs":0,"pending_jobs":0,"storage_bytes":0},"version":1,
     "created_at":"2026-01-01T00:00:00.000Z","updated_at":"2026-01-01T00:00:00.000Z"},
    {"id":2,"name":"robotics","weight":2.5,
     "quota":{"slots":64,"running_jobs":4,"pending_jobs":null,"nodes_per_job":8,
              "max_priority":60,"storage_bytes":10737418240},
     "usage":{"slots_in_use":8,"running_jobs":2,"pending_jobs":5,"storage_bytes":1610612736},
     "version":4,"created_at":"2026-01-01T00:00:00.000Z","updated_at":"2026-02-01T10:00:00.000Z"}
  ]})"));
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(TenantsTable(*reply),
            "ID  NAME      WEIGHT  SLOTS  RUNNING  PENDING  NODES/JOB  STORAGE GIB  VERSION\n"
            "1   default   1.0     0/-    0/-      0/-      -          0.00/-       1\n"
            "2   robotics  2.5     8/64   2/4      5/-      8          1.50/10.00   4\n");
  EXPECT_EQ(TenantDetail(reply->tenants[1]),
            "id:            2\n"
            "name:          robotics\n"
            "weight:        2.5\n"
            "slots:         8/64 in use/quota\n"
            "running jobs:  2/4\n"
            "pending jobs:  5/-\n"
            "nodes per job: 8\n"
            "max priority:  60\n"
            "storage:       1.50/10.00 GiB in use/quota\n"
            "version:       4\n"
            "created:       2026-01-01T00:00:00.000Z\n"
            "updated:       2026-02-01T10:00:00.000Z\n");
}

TEST(TenancyFormatTest, TokensSayWhetherTheyStillWork) {
  const int64_t now = *common::ParseUtcTime("2026-06-01T00:00:00Z");
  auto reply = api::v1::ParseTokenList(json::parse(R"({"tokens":[
    {"id":1,"tenant_id":1,"tenant":"default","role":"cluster-admin","name":"bootstrap admin",
     "created_at":"2026-01-01T00:00:00.000Z","expires_at":null,"revoked_at":null},
    {"id":2,"tenant_id":2,"tenant":"robotics","role":"member","name":"ci",
     "created_at":"2026-01-01T00:00:00.000Z","expires_at":"2026-02-01T00:00:00.000Z","revoked_at":null},
    {"id":3,"tenant_id":2,"tenant":"robotics","role":"viewer","name":"old",
     "created_at":"2026-01-01T00:00:00.000Z","expires_at":"2027-01-01T00:00:00.000Z",
     "revoked_at":"2026-03-01T00:00:00.000Z"}]})"));
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(TokensTable(*reply, now),
            "ID  TENANT    ROLE           NAME             CREATED                   EXPIRES       "
            "            STATE\n"
            "1   default   cluster-admin  bootstrap admin  2026-01-01T00:00:00.000Z  never         "
            "            active\n"
            "2   robotics  member         ci               2026-01-01T00:00:00.000Z  "
            "2026-02-01T00:00:00.000Z  expired\n"
            "3   robotics  viewer         old              2026-01-01T00:00:00.000Z  "
            "2027-01-01T00:00:00.000Z  revoked\n");
}

TEST(TenancyFormatTest, CreatedTokenShowsItsSecret) {
  auto t = api::v1::ParseCreatedToken(json::parse(R"({"id":5,"tenant_id":2,"tenant":"robotics",
    "role":"member","name":"ci","created_at":"2026-01-01T00:00:00.000Z","expires_at":null,
    "revoked_at":null,"token":"abc123"})"));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(TokenDetail(*t),
            "id:      5\n"
            "tenant:  robotics (2)\n"
            "role:    member\n"
            "name:    ci\n"
            "created: 2026-01-01T00:00:00.000Z\n"
            "expires: never\n"
            "token:   abc123\n");
}

TEST(TenancyFormatTest, WhoAmIAndAudit) {
  EXPECT_EQ(WhoAmIText(*api::v1::ParseWhoAmI(json::parse(
                R"({"token_id":3,"name":"ci","tenant_id":2,"tenant":"robotics","role":"member"})"))),
            "token:  ci (id 3)\n"
            "role:   member\n"
            "tenant: robotics (id 2)\n");
  auto page = api::v1::ParseAuditPage(json::parse(R"({"entries":[{"id":9,
    "time":"2026-01-01T00:00:00.000Z","token_id":null,"actor":"anonymous","role":"",
    "tenant_id":null,"tenant":"","method":"POST","route":"/v1/tenants","path":"/v1/tenants",
    "target":"/v1/tenants","status":401,"outcome":"unauthenticated","request_id":"r1"}],
    "next_cursor":null})"));
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_EQ(AuditTable(page->entries),
            "TIME                      ACTOR      ROLE  TENANT  METHOD  ROUTE        TARGET       "
            "STATUS  OUTCOME\n"
            "2026-01-01T00:00:00.000Z  anonymous                POST    /v1/tenants  /v1/tenants  "
            "401     unauthenticated\n");
}

TEST(TenancyFormatTest, UsageInHours) {
  json u = {{"tenant_id", 3}, {"tenant", "acme"}, {"from", "2026-11-01"}, {"to", "2026-11-30"},
            {"days", {{{"day", "2026-11-20"}, {"slot_type", "cpu"}, {"token_id", 4},
                       {"token_name", "ci"}, {"slot_seconds", 5400}},
                      {{"day", "2026-11-21"}, {"slot_type", "gpu"}, {"token_id", nullptr},
                       {"token_name", nullptr}, {"slot_seconds", 3600}}}},
            {"total_slot_seconds", 9000}, {"slot_hours", {{"cpu", 1.5}, {"gpu", 1.0}}}};
  auto usage = api::v1::ParseTenantUsage(u);
  ASSERT_TRUE(usage.ok()) << usage.status().ToString();
  const std::string t = UsageTable(*usage);
  EXPECT_NE(t.find("tenant acme, 2026-11-01 to 2026-11-30"), std::string::npos) << t;
  EXPECT_NE(t.find("ci"), std::string::npos);
  EXPECT_NE(t.find("1.50"), std::string::npos);
  EXPECT_NE(t.find("total: 1.50 cpu slot-hours, 1.00 GPU-hours"), std::string::npos) << t;
}

TEST(TenancyFormatTest, Nodes) {
  auto reply = api::v1::ParseNodeList(json::parse(R"({"nodes":[{"id":1,"name":"a",
    "address":"10.0.0.1","agent_url":"http://10.0.0.1:7070","state":"UP","cpu_slots":8,
    "gpus":[{"index":0}],"memory_bytes":0,"slots_used":2,"draining":true,"isolation":{},
    "last_heartbeat":"2026-01-01T00:00:00.000Z"}]})"));
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(NodesTable(*reply),
            "ID  NAME  ADDRESS   STATE  CPU  GPUS  USED  DRAINING  LAST HEARTBEAT\n"
            "1   a     10.0.0.1  UP     8    1     2     yes       2026-01-01T00:00:00.000Z\n");
  EXPECT_EQ(Cell(json::object(), "x"), "-");
}

}  // namespace
}  // namespace cli
