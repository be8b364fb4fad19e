// quota.storage_bytes on the in-memory twin (label unit): set and shown by TenantsService, with
// its bounds; dataset uploads admitted up to the quota by their declared size and refused one
// byte past it with nothing stored; a path import's manifest past it failing the version; a
// tenant already past its quota queueing no import; deleting a version freeing its bytes.
#include "controlplane/service/storage_quota.h"

#include <gtest/gtest.h>

#include "common/crypto.h"
#include "controlplane/service/dataset_lifecycle.h"
#include "controlplane/service/datasets_service.h"
#include "controlplane/service/tenants_service.h"
#include "controlplane/testing/memory_service_fixture.h"

namespace controlplane::service {
namespace {

using common::Code;
using nlohmann::json;

class StorageQuotaTest : public testing::MemoryServiceTest {
 protected:
  void SetUp() override {
    MemoryServiceTest::SetUp();
    Quota q;
    q.storage_bytes = 1000;
    tenant_ = AddTenant("lab", q);
    member_ = AddPerson(tenant_, "member");
    root_ = AddPerson(AddTenant("home"), "cluster-admin");
    ParkNode("n1", 4, /*draining=*/false);
    files_ = std::make_unique<DatasetUploadFiles>(data_dir_ + "/server");
    DatasetUploadLimits limits;
    limits.max_bytes = int64_t{1} << 45;
    uploads_ = std::make_unique<DatasetUploads>(db_, *files_, limits, data_dir_ + "/datasets",
                                                clock(), nullptr);
  }

  DatasetsService Datasets() {
    return DatasetsService(db_, data_dir_ + "/datasets", clock(), nullptr, uploads_.get());
  }
  TenantsService Tenants() { return TenantsService(db_, clock()); }

  Result<api::v1::Dataset> Upload(const std::string& name, int64_t bytes) {
    return Datasets().Import(
        member_, json{{"name", name},
                      {"source",
                       {{"upload", {{"bytes", bytes}, {"sha256", std::string(64, 'a')}}},
                        {"filter", "train"}}}}
                     .dump());
  }
  Result<api::v1::Dataset> PathImport(const std::string& name) {
    return Datasets().Import(
        member_, json{{"name", name}, {"source", {{"path", "/shared/" + name + ".hdf5"}}}}.dump());
  }
  // The import job of dataset `d` reports a manifest of `bytes`; returns the version after it.
  DatasetRecord ReportManifest(const api::v1::Dataset& d, int64_t bytes) {
    const json manifest = {{"stats", {{"episodes", 1}, {"frames", 2}}},
                           {"keys", json::array()},
                           {"shards", {{{"file", "shard-0.hdf5"}, {"bytes", bytes}}}}};
    auto uow = Begin();
    EXPECT_TRUE(
        RecordDatasetEvent(*uow, d.job_id.value_or(0), {{"manifest", manifest}}, now_.load())
            .ok());
    auto got = uow->datasets().Get(d.id, std::nullopt, false);
    EXPECT_TRUE(uow->Commit().ok());
    return got.ok() && got->has_value() ? **got : DatasetRecord{};
  }
  int64_t Used() {
    auto t = Tenants().Get(member_, tenant_);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? t->usage.storage_bytes : -1;
  }
  size_t Versions() {
    auto uow = Begin();
    DatasetQuery q;
    q.tenant_id = tenant_;
    q.include_deleted = true;
    auto rows = uow->datasets().List(q);
    return rows.ok() ? rows->size() : 0;
  }

  int64_t tenant_ = 0;
  Principal member_, root_;
  std::unique_ptr<DatasetUploadFiles> files_;
  std::unique_ptr<DatasetUploads> uploads_;
};

TEST_F(StorageQuotaTest, ClusterAdminsSetItWithinBoundsAndTheTenantSeesItsUsage) {
  auto tenants = Tenants();
  auto got = tenants.Get(member_, tenant_);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->quota.storage_bytes, 1000);
  EXPECT_EQ(got->usage.storage_bytes, 0);
  const int64_t pib = int64_t{1} << 50;
  auto set = tenants.Patch(root_, tenant_, json{{"quota", {{"storage_bytes", pib}}}}.dump(), "");
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->quota.storage_bytes, pib);
  for (const json& bad : {json(-1), json(pib + 1), json(1.5), json("1G"), json(true)}) {
    auto r = tenants.Patch(root_, tenant_, json{{"quota", {{"storage_bytes", bad}}}}.dump(), "");
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << bad.dump();
    EXPECT_EQ(r.status().field(), "quota.storage_bytes") << bad.dump();
  }
  EXPECT_EQ(tenants.Get(root_, tenant_)->quota.storage_bytes, pib);  // unchanged
  // A member does not set its own quota.
  EXPECT_EQ(
      tenants.Patch(member_, tenant_, R"({"quota":{"storage_bytes":null}})", "").status().code(),
      Code::kPermissionDenied);
  auto unset = tenants.Patch(root_, tenant_, R"({"quota":{"storage_bytes":null}})", "");
  ASSERT_TRUE(unset.ok()) << unset.status().ToString();
  EXPECT_FALSE(unset->quota.storage_bytes.has_value());
  // No quota: no limit.
  EXPECT_TRUE(Upload("big", int64_t{1} << 40).ok());
  EXPECT_EQ(Used(), int64_t{1} << 40);
}

TEST_F(StorageQuotaTest, UploadsAreAdmittedUpToTheQuotaByTheirDeclaredSize) {
  auto first = Upload("a", 600);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(Used(), 600);
  // One byte past the quota: refused, naming what is held, asked and allowed; nothing stored.
  auto over = Upload("b", 401);
  EXPECT_EQ(over.status().code(), Code::kResourceExhausted);
  EXPECT_EQ(over.status().field(), "source.upload.bytes");
  EXPECT_EQ(over.status().message(),
            "tenant lab holds 600 bytes of datasets, images and checkpoints; 401 more exceed its "
            "quota.storage_bytes of 1000");
  EXPECT_EQ(Versions(), 1u);
  // Exactly to the quota: admitted.
  auto fits = Upload("b", 400);
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  EXPECT_EQ(Used(), 1000);
  EXPECT_EQ(Upload("c", 1).status().code(), Code::kResourceExhausted);
  // Deleting a version frees its bytes.
  auto del = Datasets().Delete(member_, first->id);
  ASSERT_TRUE(del.ok()) << del.status().ToString();
  EXPECT_EQ(Used(), 400);
  EXPECT_TRUE(Upload("d", 600).ok());
}

TEST_F(StorageQuotaTest, AnImportWhoseManifestIsPastTheQuotaFails) {
  auto big = PathImport("big");
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_EQ(Used(), 0);  // its size is not known yet
  const DatasetRecord refused = ReportManifest(*big, 1001);
  EXPECT_TRUE(refused.manifest.is_null());
  EXPECT_NE(refused.error.find("1001 more exceed its quota.storage_bytes of 1000"),
            std::string::npos)
      << refused.error;
  // What it wrote is on the root all the same: counted until the version is deleted.
  EXPECT_EQ(refused.bytes, 1001);
  EXPECT_NE(refused.error.find("until this version is deleted"), std::string::npos);
  EXPECT_EQ(Used(), 1001);
  {
    // Its job ends: the version fails, with the quota's message.
    JobRecord job;
    job.id = *big->job_id;
    job.state = api::JobState::kSucceeded;
    auto uow = Begin();
    ASSERT_TRUE(FinishDatasetImport(*uow, job, now_.load()).ok());
    ASSERT_TRUE(uow->Commit().ok());
    auto d = Datasets().Get(member_, big->id);
    EXPECT_EQ(d->dataset.state, "failed");
    EXPECT_EQ(d->dataset.error, refused.error);
  }
  EXPECT_EQ(Used(), 1001);
  EXPECT_EQ(Upload("blocked", 1).status().code(), Code::kResourceExhausted);
  ASSERT_TRUE(Datasets().Delete(member_, big->id).ok());
  EXPECT_EQ(Used(), 0);
  // An upload holds 300 of the quota; an import of 700 fills it exactly.
  ASSERT_TRUE(Upload("held", 300).ok());
  auto fits = PathImport("fits");
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  const DatasetRecord stored = ReportManifest(*fits, 700);
  EXPECT_EQ(stored.bytes, 700);
  EXPECT_TRUE(stored.error.empty()) << stored.error;
  EXPECT_EQ(Used(), 1000);
  // Still within: a path import is queued (its manifest decides). Lowered below what the tenant
  // holds: none is queued, nothing stored.
  EXPECT_TRUE(PathImport("next").ok());
  ASSERT_TRUE(Tenants().Patch(root_, tenant_, R"({"quota":{"storage_bytes":999}})", "").ok());
  const size_t before = Versions();
  auto refused_import = PathImport("more");
  EXPECT_EQ(refused_import.status().code(), Code::kResourceExhausted);
  EXPECT_EQ(refused_import.status().field(), "source");
  EXPECT_EQ(Versions(), before);
}

}  // namespace
}  // namespace controlplane::service
