// TenantsService on the in-memory twin (label unit): PATCH with If-Match (a stale version is
// 412 and changes nothing), who may read and change tenants, and unique names.
#include "controlplane/service/tenants_service.h"

#include <gtest/gtest.h>

#include "controlplane/testing/memory_service_fixture.h"

namespace controlplane::service {
namespace {

using common::Code;

class TenantsServiceTest : public testing::MemoryServiceTest {
 protected:
  void SetUp() override {
    MemoryServiceTest::SetUp();
    home_ = AddTenant("home");
    root_ = AddPerson(home_, "cluster-admin");
  }
  TenantsService Tenants() { return TenantsService(db_, clock()); }
  int64_t home_ = 0;
  Principal root_;
};

TEST_F(TenantsServiceTest, PatchWithTheVersionReadSucceedsAndAStaleOneIs412) {
  auto tenants = Tenants();
  auto made = tenants.Create(root_, R"({"name":"lab","weight":2,"quota":{"slots":8}})");
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  const int64_t id = made->id;
  EXPECT_EQ(made->version, 1);
  EXPECT_EQ(made->quota.slots, 8);
  now_ += 1000;
  auto patched = tenants.Patch(root_, id, R"({"quota":{"pending_jobs":5}})", "\"1\"");
  ASSERT_TRUE(patched.ok()) << patched.status().ToString();
  EXPECT_EQ(patched->version, 2);
  EXPECT_EQ(patched->quota.pending_jobs, 5);
  EXPECT_EQ(patched->quota.slots, 8);  // fields not named are kept
  EXPECT_EQ(patched->weight, 2.0);
  auto stale = tenants.Patch(root_, id, R"({"weight":9})", "1");
  EXPECT_EQ(stale.status().code(), Code::kPreconditionFailed);  // 412
  EXPECT_EQ(stale.status().field(), "If-Match");
  auto after = tenants.Get(root_, id);
  EXPECT_EQ(after->weight, 2.0);
  EXPECT_EQ(after->version, 2);
  // Unconditional writes, and bad input that changes nothing.
  EXPECT_EQ(tenants.Patch(root_, id, R"({"weight":3})", "*")->version, 3);
  EXPECT_EQ(tenants.Patch(root_, id, R"({"weight":4})", "")->version, 4);
  EXPECT_EQ(tenants.Patch(root_, id, R"({"weight":5})", "v4").status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(tenants.Patch(root_, id, R"({"weight":-1})", "4").status().field(), "weight");
  EXPECT_EQ(tenants.Patch(root_, id, R"({"colour":"red"})", "4").status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(tenants.Patch(root_, id + 100, R"({"weight":5})", "").status().code(), Code::kNotFound);
  EXPECT_EQ(tenants.Get(root_, id)->version, 4);
}

TEST_F(TenantsServiceTest, OnlyClusterAdminsChangeTenantsAndOthersSeeTheirOwn) {
  auto tenants = Tenants();
  const int64_t lab = tenants.Create(root_, R"({"name":"lab"})")->id;
  const Principal lab_admin = AddPerson(lab, "tenant-admin");
  EXPECT_EQ(tenants.Patch(lab_admin, lab, R"({"weight":5})", "").status().code(),
            Code::kPermissionDenied);
  EXPECT_EQ(tenants.Patch(lab_admin, home_, R"({"weight":5})", "").status().code(),
            Code::kNotFound);
  EXPECT_EQ(tenants.Create(lab_admin, R"({"name":"mine"})").status().code(),
            Code::kPermissionDenied);
  EXPECT_EQ(tenants.Get(lab_admin, home_).status().code(), Code::kNotFound);
  EXPECT_TRUE(tenants.Get(lab_admin, lab).ok());
  auto seen = tenants.List(lab_admin);
  ASSERT_EQ(seen->tenants.size(), 1u);
  EXPECT_EQ(seen->tenants[0].name, "lab");
  EXPECT_EQ(tenants.List(root_)->tenants.size(), 2u);
  EXPECT_EQ(tenants.Create(root_, R"({"name":"lab"})").status().code(), Code::kAlreadyExists);
  EXPECT_EQ(tenants.Patch(root_, lab, R"({"name":"home"})", "").status().code(),
            Code::kAlreadyExists);
  EXPECT_EQ(tenants.Get(root_, lab)->name, "lab");
}

}  // namespace
}  // namespace controlplane::service
