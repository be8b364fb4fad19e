// The stores against a real PostgreSQL (label pg): migrations, then the suites shared with the
// in-memory twin, the store contracts (testing/store_conformance.h) and the service flows over
// them (testing/service_flow_suite.h). Each test gets a fresh database in one cluster per binary.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "controlplane/db/migrations.h"
#include "controlplane/db/pg.h"
#include "controlplane/db/stores.h"
#include "controlplane/testing/pg_database_fixture.h"
#include "controlplane/testing/dataset_store_conformance.h"
#include "controlplane/testing/pipeline_store_conformance.h"
#include "controlplane/testing/service_flow_suite.h"
#include "controlplane/testing/store_conformance.h"
#include "controlplane/testing/tenant_store_conformance.h"

namespace controlplane {
namespace {

class StoresPgTest : public testing::PgDatabaseTest {
 protected:
  void SetUp() override { OpenFreshDatabase("stores"); }
};

TEST_F(StoresPgTest, MigrationsApplyOnceAndReapplyAsNoOp) {
  EXPECT_EQ(*db::CurrentSchemaVersion(*pool_), db::EmbeddedMigrations().back().version);
  auto again = db::ApplyMigrations(*pool_, db::EmbeddedMigrations());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, 0);
  auto fresh = pg_->CreateDatabase("fresh_schema");
  ASSERT_TRUE(fresh.ok());
  auto pool = db::PgPool::Open(*fresh, 1);
  ASSERT_TRUE(pool.ok());
  EXPECT_EQ(*db::CurrentSchemaVersion(**pool), 0);
  EXPECT_EQ(*db::ApplyMigrations(**pool, db::EmbeddedMigrations()),
            static_cast<int>(db::EmbeddedMigrations().size()));
  EXPECT_EQ(*db::ApplyMigrations(**pool, db::EmbeddedMigrations()), 0);
}

// Upgrades go forward only: a database a newer binary migrated is refused, and left as it was.
TEST_F(StoresPgTest, ADatabaseFromANewerSchemaIsRefused) {
  const int newest = db::EmbeddedMigrations().back().version;
  {
    auto tx = db::PgTx::Begin(*pool_);
    ASSERT_TRUE(tx.ok());
    ASSERT_TRUE((*tx)->Exec("INSERT INTO schema_migrations (version, name) VALUES ($1, 'future')",
                            {db::P(newest + 1)})
                    .ok());
    ASSERT_TRUE((*tx)->Commit().ok());
  }
  auto applied = db::ApplyMigrations(*pool_, db::EmbeddedMigrations());
  ASSERT_FALSE(applied.ok());
  EXPECT_EQ(applied.status().code(), common::Code::kFailedPrecondition);
  EXPECT_NE(applied.status().message().find("version " + std::to_string(newest + 1)),
            std::string::npos)
      << applied.status().ToString();
  EXPECT_EQ(*db::CurrentSchemaVersion(*pool_), newest + 1);
  // One version behind the database is refused the same way; the same version is a no-op.
  std::vector<db::Migration> older(db::EmbeddedMigrations().begin(),
                                   db::EmbeddedMigrations().end() - 1);
  std::vector<db::Migration> with_future = db::EmbeddedMigrations();
  with_future.push_back({newest + 1, "future", "SELECT 1"});
  EXPECT_FALSE(db::ApplyMigrations(*pool_, older).ok());
  auto same = db::ApplyMigrations(*pool_, with_future);
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_EQ(*same, 0);
}

// A page of GET /v1/jobs, filtered by state or not, for all tenants or one, is read from an index
// in id order and stops after the page (jobs_state_id_idx, jobs_tenant_state_id_idx, the primary
// key): the scan of jobs feeds the LIMIT directly, never a sort of every matching job (as a plan
// that joined the tenants first did: for each tenant, all its jobs in the state below the
// cursor, then sorted), and never reads the whole table.
TEST_F(StoresPgTest, JobListPagesAreReadInIdOrderFromAnIndex) {
  {
    auto tx = db::PgTx::Begin(*pool_);
    ASSERT_TRUE(tx.ok());
    // Of every 100 jobs: 1 PENDING, 4 RUNNING, the rest SUCCEEDED; two tenants.
    ASSERT_TRUE((*tx)->ExecScript(
                         "INSERT INTO tenants (name) VALUES ('plan_a'), ('plan_b');"
                         "INSERT INTO jobs (tenant_id, name, kind, state, priority, spec,"
                         " created_at, updated_at)"
                         " SELECT (SELECT min(id) FROM tenants WHERE name LIKE 'plan_%') + g % 2,"
                         " 'job-' || g, 'command', CASE WHEN g % 100 = 0 THEN 'PENDING'"
                         " WHEN g % 100 < 5 THEN 'RUNNING' ELSE 'SUCCEEDED' END, 50,"
                         " '{}'::jsonb, now(), now() FROM generate_series(1, 30000) g;"
                         "ANALYZE jobs; ANALYZE tenants;")
                    .ok());
    ASSERT_TRUE((*tx)->Commit().ok());
  }
  auto tx = db::PgTx::Begin(*pool_);
  ASSERT_TRUE(tx.ok());
  auto tenant = (*tx)->Exec("SELECT min(id) AS id FROM tenants WHERE name = 'plan_a'");
  ASSERT_TRUE(tenant.ok());
  const std::string a = std::to_string(tenant->Int(0, "id"));
  // Every plan node with its parent's type, depth first.
  using Node = std::pair<nlohmann::json, std::string>;
  std::function<void(const nlohmann::json&, const std::string&, std::vector<Node>&)> nodes =
      [&](const nlohmann::json& n, const std::string& parent, std::vector<Node>& out) {
        out.emplace_back(n, parent);
        for (const auto& c : n.value("Plans", nlohmann::json::array())) {
          nodes(c, n.value("Node Type", ""), out);
        }
      };
  const db::Param none;
  struct Page {
    const char* what;
    db::Param tenant, state, before;
  };
  for (const Page& p : {Page{"all", none, none, none}, Page{"deep", none, none, "15000"},
                        Page{"pending", none, "PENDING", none},
                        Page{"pending deep", none, "PENDING", "15000"},
                        Page{"succeeded", none, "SUCCEEDED", none},
                        Page{"pending of a tenant", a, "PENDING", none},
                        Page{"running of a tenant, deep", a, "RUNNING", "15000"}}) {
    auto r = (*tx)->Exec("EXPLAIN (ANALYZE, FORMAT JSON) " + db::JobListSql(),
                         {p.tenant, p.state, p.before, db::P(int64_t{21}), none});
    ASSERT_TRUE(r.ok()) << p.what << ": " << r.status().ToString();
    const nlohmann::json plan = nlohmann::json::parse(r->Str(0, "QUERY PLAN"))[0]["Plan"];
    std::vector<Node> all;
    nodes(plan, "", all);
    int scans = 0;
    for (const auto& [n, parent] : all) {
      if (n.value("Relation Name", "") != "jobs") continue;
      ++scans;
      const std::string type = n.value("Node Type", "");
      EXPECT_TRUE(type == "Index Scan" || type == "Index Only Scan") << p.what << ": " << plan;
      EXPECT_EQ(parent, "Limit") << p.what << ": " << plan;
      // Rows read, kept and filtered out: a scan in id order past rows of other states may read
      // many pages' worth, never most of the table (30,000 rows).
      const double read = (n.value("Actual Rows", 0.0) + n.value("Rows Removed by Filter", 0.0)) *
                          n.value("Actual Loops", 1.0);
      EXPECT_LE(read, 3000) << p.what << ": " << plan;
    }
    EXPECT_EQ(scans, 1) << p.what << ": " << plan;
  }
}

// A statement's text is prepared once per connection and survives a rolled-back transaction.
TEST_F(StoresPgTest, StatementsArePreparedOncePerConnection) {
  const std::string sql = "SELECT $1::bigint + 1 AS n";
  auto prepared = [&](db::PgTx& tx) {
    auto r = tx.Exec("SELECT count(*) AS n FROM pg_prepared_statements WHERE statement = $1",
                     {db::P(sql)});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->Int(0, "n") : -1;
  };
  for (int round = 0; round < 2; ++round) {
    auto tx = db::PgTx::Begin(*pool_);  // the idle connection used last, again
    ASSERT_TRUE(tx.ok());
    for (int64_t i = 0; i < 3; ++i) {
      auto r = (*tx)->Exec(sql, {db::P(i)});
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(r->Int(0, "n"), i + 1);
    }
    EXPECT_EQ(prepared(**tx), 1);
    // A failed statement aborts the transaction; it is rolled back, the statements stay.
    EXPECT_FALSE((*tx)->Exec("SELECT 1/0").ok());
  }
}

}  // namespace

namespace testing {
INSTANTIATE_TYPED_TEST_SUITE_P(pg, StoreConformanceTest, PgBackend);
INSTANTIATE_TYPED_TEST_SUITE_P(pg, TenantStoreConformanceTest, PgBackend);
INSTANTIATE_TYPED_TEST_SUITE_P(pg, DatasetStoreConformanceTest, PgBackend);
INSTANTIATE_TYPED_TEST_SUITE_P(pg, PipelineStoreConformanceTest, PgBackend);
INSTANTIATE_TYPED_TEST_SUITE_P(pg, ServiceFlowTest, PgBackend);
}  // namespace testing

}  // namespace controlplane
