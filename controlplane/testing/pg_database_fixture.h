// Test fixtures for the store and service suites that run against a real PostgreSQL (label pg):
// one private cluster per test binary, and for every test a fresh, migrated database, a pool on
// it, a data directory of its own and a settable clock.
//
// PgBackend is the PostgreSQL side of the suites shared with the in-memory twin
// (store_conformance.h); PgDatabaseTest is the fixture of suites that run on PostgreSQL only.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "controlplane/db/migrations.h"
#include "controlplane/db/stores.h"
#include "tests/support/pg_harness.h"

namespace controlplane::testing {

class PgBackend {
 public:
  static constexpr const char* kName = "pg";

  // Starts the binary's cluster on the first call; every suite of the binary shares it, and it
  // stops when the binary exits (starting and stopping one costs many seconds).
  static void SetUpSuite() {
    if (cluster_ != nullptr) return;
    auto cluster = std::make_unique<embody::testing::PgCluster>();
    common::Status st = cluster->Start();
    ASSERT_TRUE(st.ok()) << st.ToString();
    cluster_ = cluster.release();
    std::atexit([] {
      delete cluster_;
      cluster_ = nullptr;
    });
  }
  static void TearDownSuite() {}
  static embody::testing::PgCluster* cluster() { return cluster_; }

  // Opens database `<prefix>_<n>` (n counts up per binary), migrated to the current schema.
  void Open(const std::string& prefix) {
    ASSERT_NE(cluster_, nullptr);
    static int counter = 0;
    auto info = cluster_->CreateDatabase(prefix + "_" + std::to_string(++counter));
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    auto pool = db::PgPool::Open(*info, 4);
    ASSERT_TRUE(pool.ok()) << pool.status().ToString();
    pool_ = std::move(pool.value());
    auto n = db::ApplyMigrations(*pool_, db::EmbeddedMigrations());
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    database_ = std::make_unique<db::PgDatabase>(*pool_);
  }

  db::PgPool& pool() { return *pool_; }
  service::Database& database() { return *database_; }

 private:
  static inline embody::testing::PgCluster* cluster_ = nullptr;
  std::unique_ptr<db::PgPool> pool_;
  std::unique_ptr<db::PgDatabase> database_;
};

class PgDatabaseTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    PgBackend::SetUpSuite();
    pg_ = PgBackend::cluster();
  }

  void OpenFreshDatabase(const std::string& prefix) {
    backend_.Open(prefix);
    if (::testing::Test::HasFatalFailure()) return;
    pool_ = &backend_.pool();
    database_ = &backend_.database();
    std::string tmpl = "/tmp/embody-" + prefix + "-data-XXXXXX";
    data_dir_ = mkdtemp(tmpl.data());
  }
  void TearDown() override {
    if (!data_dir_.empty()) std::filesystem::remove_all(data_dir_);
  }

  // A new tenant, and a caller of it with `role` and `token_id`.
  service::Principal MakeTenant(const std::string& name, const std::string& role = "member",
                                int64_t token_id = 1) {
    auto uow = database_->Begin();
    EXPECT_TRUE(uow.ok());
    service::TenantRecord t;
    t.name = name;
    auto id = (*uow)->tenants().CreateTenant(t, now_.load());
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    EXPECT_TRUE((*uow)->Commit().ok());
    return Person(*id, name, role, token_id);
  }
  static service::Principal Person(int64_t tenant_id, const std::string& tenant,
                                   const std::string& role, int64_t token_id) {
    service::Principal p;
    p.tenant_id = tenant_id;
    p.tenant = tenant;
    p.role = role;
    p.token_name = role;
    p.token_id = token_id;
    return p;
  }

  static inline embody::testing::PgCluster* pg_ = nullptr;
  PgBackend backend_;
  db::PgPool* pool_ = nullptr;
  service::Database* database_ = nullptr;
  std::string data_dir_;
  std::atomic<int64_t> now_{1'700'000'000'000};
};

}  // namespace controlplane::testing
