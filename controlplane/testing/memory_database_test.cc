// The in-memory twin (memory_database.h, label unit): the suites it shares with PostgreSQL (the
// store contracts and the service flows over them), then what is the twin's own: units of work
// that are serialised, refused when nested on one thread, and finished for good after a failed
// statement or a commit.
#include "controlplane/testing/memory_database.h"

#include <gtest/gtest.h>

#include "controlplane/testing/dataset_store_conformance.h"
#include "controlplane/testing/pipeline_store_conformance.h"
#include "controlplane/testing/service_flow_suite.h"
#include "controlplane/testing/store_conformance.h"
#include "controlplane/testing/tenant_store_conformance.h"

namespace controlplane::testing {

// The twin as a Backend of the shared suites: a new, empty database per test.
class MemoryBackend {
 public:
  static void SetUpSuite() {}
  static void TearDownSuite() {}
  void Open(const std::string& /*prefix*/) { database_ = std::make_unique<MemoryDatabase>(); }
  service::Database& database() { return *database_; }

 private:
  std::unique_ptr<MemoryDatabase> database_;
};

INSTANTIATE_TYPED_TEST_SUITE_P(memory, StoreConformanceTest, MemoryBackend);
INSTANTIATE_TYPED_TEST_SUITE_P(memory, TenantStoreConformanceTest, MemoryBackend);
INSTANTIATE_TYPED_TEST_SUITE_P(memory, DatasetStoreConformanceTest, MemoryBackend);
INSTANTIATE_TYPED_TEST_SUITE_P(memory, PipelineStoreConformanceTest, MemoryBackend);
INSTANTIATE_TYPED_TEST_SUITE_P(memory, ServiceFlowTest, MemoryBackend);

namespace {

service::TenantRecord Named(const std::string& name) {
  service::TenantRecord t;
  t.name = name;
  return t;
}

TEST(MemoryDatabaseTest, ASecondUnitOnTheSameThreadIsRefusedNotDeadlocked) {
  MemoryDatabase db;
  auto first = db.Begin();
  ASSERT_TRUE(first.ok());
  auto second = db.Begin();
  EXPECT_EQ(second.status().code(), common::Code::kInternal);
  first->reset();
  EXPECT_TRUE(db.Begin().ok());
}

TEST(MemoryDatabaseTest, AFailedStatementFailsTheCommitAndStoresNothing) {
  MemoryDatabase db;
  {
    auto uow = std::move(db.Begin().value());
    ASSERT_TRUE(uow->tenants().CreateTenant(Named("a"), 1).ok());
    ASSERT_TRUE(uow->Commit().ok());
  }
  auto uow = std::move(db.Begin().value());
  ASSERT_TRUE(uow->tenants().CreateTenant(Named("b"), 1).ok());
  EXPECT_EQ(uow->tenants().CreateTenant(Named("a"), 1).status().code(),
            common::Code::kAlreadyExists);
  EXPECT_EQ(uow->Commit().code(), common::Code::kInternal);
  uow = std::move(db.Begin().value());
  EXPECT_EQ(*uow->tenants().CountTenants(), 1);
}

TEST(MemoryDatabaseTest, AUnitTakesNoCallsAfterItsCommit) {
  MemoryDatabase db;
  auto uow = std::move(db.Begin().value());
  ASSERT_TRUE(uow->Commit().ok());
  EXPECT_FALSE(uow->tenants().CountTenants().ok());
  EXPECT_FALSE(uow->Commit().ok());
  // Its lock is released at Commit, not when it is destroyed.
  EXPECT_TRUE(db.Begin().ok());
}

TEST(MemoryDatabaseTest, UnitsOnOtherThreadsWaitTheirTurnAndSeeCommittedState) {
  MemoryDatabase db;
  constexpr int kThreads = 4, kEach = 50;
  {
    auto uow = std::move(db.Begin().value());
    ASSERT_TRUE(uow->tenants().CreateTenant(Named("a"), 1).ok());
    ASSERT_TRUE(uow->Commit().ok());
  }
  // Read-modify-write of one tenant's version from several threads: serialised units lose none.
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&db] {
      for (int i = 0; i < kEach; ++i) {
        auto uow = db.Begin();
        ASSERT_TRUE(uow.ok());
        auto tenant = (*uow)->tenants().GetTenant(1, true);
        ASSERT_TRUE(tenant.ok() && tenant->has_value());
        (*tenant)->weight += 1;
        ASSERT_TRUE((*uow)->tenants().UpdateTenant(**tenant, 2).ok());
        ASSERT_TRUE((*uow)->Commit().ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  auto uow = std::move(db.Begin().value());
  auto tenant = **uow->tenants().GetTenant(1, false);
  EXPECT_EQ(tenant.weight, 1 + kThreads * kEach);
  EXPECT_EQ(tenant.version, 1 + kThreads * kEach);
}

}  // namespace
}  // namespace controlplane::testing
