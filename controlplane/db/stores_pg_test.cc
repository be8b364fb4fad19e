// The stores against a real PostgreSQL (label pg): migrations, then the suites shared with the
// in-memory twin, the store contracts (testing/store_conformance.h) and the service flows over
// them (testing/service_flow_suite.h). Each test gets a fresh database in one cluster per binary.
#include <gtest/gtest.h>

#include "controlplane/db/migrations.h"
#include "controlplane/db/stores.h"
#include "controlplane/testing/pg_database_fixture.h"
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

}  // namespace

namespace testing {
INSTANTIATE_TYPED_TEST_SUITE_P(pg, StoreConformanceTest, PgBackend);
INSTANTIATE_TYPED_TEST_SUITE_P(pg, TenantStoreConformanceTest, PgBackend);
INSTANTIATE_TYPED_TEST_SUITE_P(pg, ServiceFlowTest, PgBackend);
}  // namespace testing

}  // namespace controlplane
