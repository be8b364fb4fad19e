// The stores against a real PostgreSQL (label pg): migrations, then the suites shared with the
// in-memory twin, the store contracts (testing/store_conformance.h) and the service flows over
// them (testing/service_flow_suite.h). Each test gets a fresh database in one cluster per binary.
#include <gtest/gtest.h>

#include "controlplane/db/migrations.h"
#include "controlplane/db/pg.h"
#include "controlplane/db/stores.h"
#include "controlplane/testing/pg_database_fixture.h"
#include "controlplane/testing/dataset_store_conformance.h"
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
INSTANTIATE_TYPED_TEST_SUITE_P(pg, ServiceFlowTest, PgBackend);
}  // namespace testing

}  // namespace controlplane
