// POST /v1/datasets on the in-memory twin of the stores: a LeRobot dataset directory is accepted
// where an HDF5 file is, with its own options, and what does not fit a directory import is
// refused naming the field, with nothing stored.
#include "controlplane/service/datasets_service.h"

#include <gtest/gtest.h>

#include "controlplane/testing/memory_service_fixture.h"

namespace controlplane {
namespace {

using nlohmann::json;

json With(json j, const std::string& key, const json& value) {
  j[key] = value;
  return j;
}

class DatasetsServiceTest : public testing::MemoryServiceTest {
 protected:
  void SetUp() override {
    MemoryServiceTest::SetUp();
    tenant_ = AddTenant("a");
    member_ = AddPerson(tenant_, "member");
    ParkNode("n1", 4, /*draining=*/false);
  }

  service::DatasetsService Datasets() {
    return service::DatasetsService(db_, data_dir_ + "/datasets", clock(), nullptr);
  }

  static std::string Body(const json& source) {
    return json{{"name", "pusht"}, {"source", source}}.dump();
  }

  // The spec of the import job the dataset `d` (as Import returned it) was given.
  json ImportJobSpec(const json& d) {
    auto uow = Begin();
    auto job = uow->jobs().Get(d["job_id"].get<int64_t>(), std::nullopt, false);
    EXPECT_TRUE(job.ok() && job->has_value());
    return job.ok() && job->has_value() ? (*job)->spec : json();
  }

  size_t StoredDatasets() {
    auto list = Datasets().List(member_, 50, "", "", 0);
    EXPECT_TRUE(list.ok()) << list.status().ToString();
    return list.ok() ? (*list)["datasets"].size() : 0;
  }

  int64_t tenant_ = 0;
  service::Principal member_;
};

TEST_F(DatasetsServiceTest, LerobotDirectoryIsQueuedAsAnImportJob) {
  auto d = Datasets().Import(member_, Body({{"format", "lerobot"},
                                            {"path", "/shared/lerobot/pusht"},
                                            {"resize", "96x128"},
                                            {"language", "push the T"}}));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ((*d)["state"], "importing");
  EXPECT_EQ((*d)["source"], json({{"format", "lerobot"},
                                  {"path", "/shared/lerobot/pusht"},
                                  {"resize", "96x128"},
                                  {"language", "push the T"}}));
  const json spec = ImportJobSpec(*d);
  EXPECT_EQ(spec["kind"], "import");
  EXPECT_EQ(spec["import"]["source"]["format"], "lerobot");
  EXPECT_EQ(spec["import"]["source"]["resize"], "96x128");
  EXPECT_EQ(spec["import"]["dataset_id"], (*d)["id"]);

  // The next import of the same name is its next version, whatever the format.
  auto hdf5 = Datasets().Import(member_, Body({{"path", "/shared/pusht.hdf5"}}));
  ASSERT_TRUE(hdf5.ok()) << hdf5.status().ToString();
  EXPECT_EQ((*hdf5)["version"], 2);
  EXPECT_EQ((*hdf5)["source"]["format"], "hdf5");
}

TEST_F(DatasetsServiceTest, LerobotRefusalsNameTheField) {
  const json lerobot = {{"format", "lerobot"}, {"path", "/shared/lerobot/pusht"}};
  struct Case {
    json source;
    std::string field;
    std::string says;
  };
  const std::vector<Case> cases = {
      // A directory, walked into with "..": refused as for hdf5.
      {{{"format", "lerobot"}, {"path", "/shared/../etc"}}, "source.path", "normalised"},
      {{{"format", "lerobot"}, {"path", "shared/pusht"}}, "source.path", "absolute"},
      // A file where a directory is needed, when the server can tell.
      {{{"format", "lerobot"}, {"path", "/shared/pusht.hdf5"}}, "source.path", "directory"},
      // An upload is one file.
      {{{"format", "lerobot"}, {"upload", {{"bytes", 10}, {"sha256", std::string(64, 'a')}}}},
       "source.upload",
       "directory"},
      // HDF5 options on a LeRobot source, and resize on an HDF5 one.
      {With(lerobot, "filter", "train"), "source.filter", "hdf5"},
      {With(lerobot, "nan", "skip"), "source.nan", "hdf5"},
      {{{"format", "hdf5"}, {"path", "/shared/pusht.hdf5"}, {"resize", "96x96"}},
       "source.resize",
       "lerobot"},
      // resize is HxW within bounds.
      {With(lerobot, "resize", "96"), "source.resize", "HxW"},
      {With(lerobot, "resize", "0x96"), "source.resize", "HxW"},
      {With(lerobot, "resize", "96x99999"), "source.resize", "HxW"},
      {With(lerobot, "resize", 96), "source.resize", "string"},
      {With(lerobot, "threads", "4"), "source.threads", "unknown"},
  };
  for (const Case& c : cases) {
    auto r = Datasets().Import(member_, Body(c.source));
    ASSERT_FALSE(r.ok()) << c.source.dump();
    EXPECT_EQ(r.status().code(), common::Code::kInvalidArgument) << c.source.dump();
    EXPECT_EQ(r.status().field(), c.field) << c.source.dump();
    EXPECT_NE(r.status().message().find(c.says), std::string::npos)
        << c.source.dump() << ": " << r.status().message();
  }
  // A format nobody built is unimplemented, not a bad request.
  auto parquet = Datasets().Import(member_, Body({{"format", "parquet"}, {"path", "/x"}}));
  EXPECT_EQ(parquet.status().code(), common::Code::kUnimplemented);
  EXPECT_EQ(parquet.status().field(), "source.format");
  EXPECT_EQ(StoredDatasets(), 0u);
}

}  // namespace
}  // namespace controlplane
