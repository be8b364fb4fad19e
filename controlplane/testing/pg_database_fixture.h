// Test fixture for the store and service suites that run against a real PostgreSQL (label pg):
// one private cluster per test binary, and for every test a fresh, migrated database, a pool on
// it, a data directory of its own and a settable clock.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>

#include "controlplane/db/migrations.h"
#include "controlplane/db/stores.h"
#include "tests/support/pg_harness.h"

namespace controlplane::testing {

class PgDatabaseTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pg_ = new embody::testing::PgCluster;
    common::Status st = pg_->Start();
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  static void TearDownTestSuite() {
    delete pg_;
    pg_ = nullptr;
  }

  // Opens database `<prefix>_<n>` (n counts up per binary), migrated to the current schema.
  void OpenFreshDatabase(const std::string& prefix) {
    ASSERT_NE(pg_, nullptr);
    static int counter = 0;
    auto info = pg_->CreateDatabase(prefix + "_" + std::to_string(++counter));
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    auto pool = db::PgPool::Open(*info, 4);
    ASSERT_TRUE(pool.ok()) << pool.status().ToString();
    pool_ = std::move(pool.value());
    auto n = db::ApplyMigrations(*pool_, db::EmbeddedMigrations());
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    database_ = std::make_unique<db::PgDatabase>(*pool_);
    std::string tmpl = "/tmp/embody-" + prefix + "-data-XXXXXX";
    data_dir_ = mkdtemp(tmpl.data());
  }
  void TearDown() override {
    if (!data_dir_.empty()) std::filesystem::remove_all(data_dir_);
  }

  static inline embody::testing::PgCluster* pg_ = nullptr;
  std::unique_ptr<db::PgPool> pool_;
  std::unique_ptr<db::PgDatabase> database_;
  std::string data_dir_;
  std::atomic<int64_t> now_{1'700'000'000'000};
};

}  // namespace controlplane::testing
