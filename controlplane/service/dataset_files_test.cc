// Downloading a ready dataset version's files (DatasetsService::OpenFile) on the in-memory twin:
// only dataset.json and the shards its manifest lists, only for the dataset's tenant, only once
// ready, and a clear refusal naming the way that works where the server cannot read the
// dataset root.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "controlplane/service/datasets_service.h"
#include "controlplane/testing/memory_service_fixture.h"

namespace controlplane {
namespace {

using nlohmann::json;

class DatasetFilesTest : public testing::MemoryServiceTest {
 protected:
  void SetUp() override {
    MemoryServiceTest::SetUp();
    tenant_ = AddTenant("a");
    viewer_ = AddPerson(tenant_, "viewer");
    stranger_ = AddPerson(AddTenant("b"), "tenant-admin");
    root_ = data_dir_ + "/datasets";
  }

  service::DatasetsService Datasets(const std::string& root) {
    return service::DatasetsService(db_, root, clock(), nullptr);
  }

  // A dataset of tenant a in `state`, its directory under root_ holding dataset.json and
  // shard-00000.shard when `write_files`.
  int64_t AddDataset(const std::string& state, bool write_files) {
    auto uow = Begin();
    service::DatasetRecord d;
    d.tenant_id = tenant_;
    d.token_id = viewer_.token_id;
    d.name = "pusht";
    auto inserted = uow->datasets().Insert(d, 1);
    EXPECT_TRUE(inserted.ok()) << inserted.status().ToString();
    d = *inserted;
    d.state = state;
    d.manifest = {{"shards", json::array({{{"file", "shard-00000.shard"}, {"bytes", 5}}})}};
    d.path = service::DatasetsService::DirectoryOf(root_, tenant_, d.id);
    EXPECT_TRUE(uow->datasets().Update(d, 2).ok());
    EXPECT_TRUE(uow->Commit().ok());
    if (write_files) {
      std::filesystem::create_directories(d.path);
      std::ofstream(d.path + "/dataset.json") << "{\"manifest\": 1}";
      std::ofstream(d.path + "/shard-00000.shard") << "12345";
      std::ofstream(d.path + "/secret.txt") << "not listed";
    }
    return d.id;
  }

  static std::string All(const service::BlobReader& r) {
    auto b = r.Read(0, static_cast<size_t>(r.size()));
    return b.ok() ? *b : "";
  }

  int64_t tenant_ = 0;
  service::Principal viewer_, stranger_;
  std::string root_;
};

TEST_F(DatasetFilesTest, ListedFilesOfAReadyDatasetAreRead) {
  const int64_t id = AddDataset(service::kDatasetReady, true);
  auto svc = Datasets(root_);
  auto m = svc.OpenFile(viewer_, id, "dataset.json");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(All(*m->reader), "{\"manifest\": 1}");
  EXPECT_EQ(m->tenant_id, tenant_);
  auto s = svc.OpenFile(viewer_, id, "shard-00000.shard");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->reader->size(), 5);
  auto tail = s->reader->Read(3, 10);  // what a Range request reads
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(*tail, "45");
}

TEST_F(DatasetFilesTest, NamesOutsideTheManifestAndOtherTenantsAreNotFound) {
  const int64_t id = AddDataset(service::kDatasetReady, true);
  auto svc = Datasets(root_);
  for (const std::string name : {"secret.txt", "..", "../dataset-1/dataset.json", ""}) {
    auto r = svc.OpenFile(viewer_, id, name);
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_EQ(r.status().code(), common::Code::kNotFound) << name;
  }
  auto other = svc.OpenFile(stranger_, id, "dataset.json");
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), common::Code::kNotFound);
}

TEST_F(DatasetFilesTest, NotReadyOrUnreadableIsAPreconditionNamingTheNodeWay) {
  auto svc = Datasets(root_);
  auto importing = svc.OpenFile(viewer_, AddDataset("importing", true), "dataset.json");
  ASSERT_FALSE(importing.ok());
  EXPECT_EQ(importing.status().code(), common::Code::kFailedPrecondition);
  EXPECT_NE(importing.status().message().find("once it is ready"), std::string::npos);

  // The root lives on the nodes: the server's copy of the path has nothing in it.
  const int64_t remote = AddDataset(service::kDatasetReady, false);
  auto r = svc.OpenFile(viewer_, remote, "dataset.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), common::Code::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("not mounted on the server"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("embody-data export-lerobot"), std::string::npos);

  // A server without a dataset root.
  auto none = Datasets("").OpenFile(viewer_, remote, "dataset.json");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), common::Code::kFailedPrecondition);
  EXPECT_NE(none.status().message().find("--dataset-root"), std::string::npos);
}

}  // namespace
}  // namespace controlplane
