// POST /v1/datasets on the in-memory twin of the stores: a LeRobot dataset directory is accepted
// where an HDF5 file is, with its own options, and what does not fit a directory import is
// refused naming the field, with nothing stored. And a command job's "datasets": bound to the
// tenant's ready versions at submit, launched with their directories.
#include "controlplane/service/datasets_service.h"

#include <gtest/gtest.h>

#include "controlplane/service/dataset_lifecycle.h"
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
  json ImportJobSpec(const api::v1::Dataset& d) {
    auto uow = Begin();
    auto job = uow->jobs().Get(d.job_id.value_or(0), std::nullopt, false);
    EXPECT_TRUE(job.ok() && job->has_value());
    return job.ok() && job->has_value() ? (*job)->spec : json();
  }

  size_t StoredDatasets() {
    auto list = Datasets().List(member_, 50, "", "", 0);
    EXPECT_TRUE(list.ok()) << list.status().ToString();
    return list.ok() ? list->datasets.size() : 0;
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
  EXPECT_EQ(d->state, "importing");
  EXPECT_EQ(d->source, json({{"format", "lerobot"},
                                  {"path", "/shared/lerobot/pusht"},
                                  {"resize", "96x128"},
                                  {"language", "push the T"}}));
  const json spec = ImportJobSpec(*d);
  EXPECT_EQ(spec["kind"], "import");
  EXPECT_EQ(spec["import"]["source"]["format"], "lerobot");
  EXPECT_EQ(spec["import"]["source"]["resize"], "96x128");
  EXPECT_EQ(spec["import"]["dataset_id"], d->id);

  // The next import of the same name is its next version, whatever the format.
  auto hdf5 = Datasets().Import(member_, Body({{"path", "/shared/pusht.hdf5"}}));
  ASSERT_TRUE(hdf5.ok()) << hdf5.status().ToString();
  EXPECT_EQ(hdf5->version, 2);
  EXPECT_EQ(hdf5->source["format"], "hdf5");
}

// A pull names a registry the operator configured, by name or host; the version stores where
// it came from, and the import job's spec says where the registry is. Anything else is refused
// on the field, with nothing stored.
TEST_F(DatasetsServiceTest, APullNamesAConfiguredRegistryAndRecordsWhereItComesFrom) {
  std::vector<api::ImageRegistry> registries{
      *api::ParseImageRegistryFlag("local=http://127.0.0.1:5000", "f"),
      *api::ParseImageRegistryFlag("hub=https://registry.example.com", "f")};
  service::DatasetsService datasets(db_, data_dir_ + "/datasets", clock(), nullptr, nullptr,
                                    registries);
  auto d = datasets.Import(member_, Body({{"format", "oci"},
                                          {"registry", "127.0.0.1:5000"},
                                          {"reference", "embody/probe:1"}}));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->state, "importing");
  const json stored{{"format", "oci"},
                    {"registry", "local"},
                    {"reference", "embody/probe:1"},
                    {"registry_url", "http://127.0.0.1:5000"}};
  EXPECT_EQ(d->source, stored);
  EXPECT_EQ(ImportJobSpec(*d)["import"]["source"], stored);

  struct Case {
    json source;
    std::string field;
  };
  const std::vector<Case> refused = {
      {{{"format", "oci"}, {"registry", "ghcr.io"}, {"reference", "x/y:1"}}, "source.registry"},
      {{{"format", "oci"}, {"registry", "hub"}, {"reference", "ghcr.io/x/y:1"}},
       "source.reference"},
      {{{"format", "oci"}, {"registry", "hub"}, {"reference", "-x:1"}}, "source.reference"},
      {{{"format", "oci"},
        {"registry", "hub"},
        {"reference", "x:1"},
        {"registry_url", "http://169.254.169.254"}},
       "source.registry_url"},
      {{{"format", "hdf5"}, {"registry", "hub"}, {"reference", "x:1"}}, "source.format"},
  };
  for (const Case& c : refused) {
    auto r = datasets.Import(member_, Body(c.source));
    ASSERT_FALSE(r.ok()) << c.source.dump();
    EXPECT_EQ(r.status().code(), common::Code::kInvalidArgument) << c.source.dump();
    EXPECT_EQ(r.status().field(), c.field) << c.source.dump() << r.status().ToString();
  }
  EXPECT_EQ(StoredDatasets(), 1u);
  // A server with no registries pulls nothing.
  auto none = Datasets().Import(member_, Body({{"format", "oci"},
                                               {"registry", "local"},
                                               {"reference", "embody/probe:1"}}));
  EXPECT_EQ(none.status().field(), "source.registry") << none.status().ToString();
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
      // An upload (a tar of the directory) takes the LeRobot options only.
      {{{"format", "lerobot"},
        {"upload", {{"bytes", 10}, {"sha256", std::string(64, 'a')}}},
        {"filter", "train"}},
       "source.filter",
       "hdf5"},
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

// A ready version of `name` in `tenant`, made by `token_id`, as a finished import leaves it.
service::DatasetRecord AddReadyVersion(service::UnitOfWork& uow, int64_t tenant,
                                       const std::string& name, int64_t token_id = 0) {
  service::DatasetRecord d;
  d.tenant_id = tenant;
  d.token_id = token_id;
  d.name = name;
  d.source = {{"path", "/shared/" + name + ".hdf5"}};
  auto in = uow.datasets().Insert(d, 1000);
  EXPECT_TRUE(in.ok()) << in.status().ToString();
  in->state = service::kDatasetReady;
  in->path = "/data/tenant-" + std::to_string(tenant) + "/dataset-" + std::to_string(in->id);
  in->manifest = {{"stats", {{"episodes", 1}, {"frames", 2}}}, {"shards", json::array()}};
  EXPECT_TRUE(uow.datasets().Update(*in, 1000).ok());
  return *in;
}

std::string CommandWithDatasets(const json& datasets) {
  return json{{"name", "byo"},
              {"kind", "command"},
              {"command", {"python3", "train.py"}},
              {"resources", {{"nodes", 1}}},
              {"datasets", datasets}}
      .dump();
}

TEST_F(DatasetsServiceTest, ACommandJobIsBoundToTheVersionsItNamesAndLaunchedWithTheirDirectories) {
  const int64_t other_tenant = AddTenant("b");
  service::DatasetRecord lift1, lift2, can1, theirs;
  {
    auto uow = Begin();
    lift1 = AddReadyVersion(*uow, tenant_, "lift");
    lift2 = AddReadyVersion(*uow, tenant_, "lift");
    can1 = AddReadyVersion(*uow, tenant_, "can", member_.token_id);
    theirs = AddReadyVersion(*uow, other_tenant, "secret");
    ASSERT_TRUE(uow->Commit().ok());
  }
  auto jobs = Jobs();
  // "lift" (the newest ready: 2) and "lift@2" are one version, bound once; "lift@1" another.
  auto sub = jobs.Submit(
      member_,
      CommandWithDatasets({"dataset:lift", "dataset:lift@2", "dataset:lift@1", "dataset:can"}), "");
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  const int64_t id = sub->job.job.id;
  // The stored spec keeps the names the job was given, for display.
  EXPECT_EQ(sub->job.job.spec["datasets"],
            json({"dataset:lift", "dataset:lift@2", "dataset:lift@1", "dataset:can"}));
  {
    const service::JobRecord row = JobRow(id);
    auto uow = Begin();
    auto bound = uow->datasets().AllForJob(id);
    ASSERT_TRUE(bound.ok());
    std::vector<int64_t> ids;
    for (const auto& d : *bound) ids.push_back(d.id);
    EXPECT_EQ(ids, (std::vector<int64_t>{lift1.id, lift2.id, can1.id}));
    auto launch = service::LaunchSpecFor(*uow, row);
    ASSERT_TRUE(launch.ok()) << launch.status().ToString();
    EXPECT_EQ((*launch)["datasets"],
              json({{"lift@1", lift1.path}, {"lift@2", lift2.path}, {"can@1", can1.path}}));
    EXPECT_EQ((*launch)["command"], json({"python3", "train.py"}));
  }
  // A version a live job reads is not deleted.
  auto del = Datasets().Delete(member_, can1.id);
  EXPECT_EQ(del.status().code(), common::Code::kFailedPrecondition);
  EXPECT_NE(del.status().message().find(std::to_string(id)), std::string::npos);

  // A job without datasets launches without any.
  auto plain = jobs.Submit(member_, Spec("plain"), "");
  ASSERT_TRUE(plain.ok());
  {
    const service::JobRecord row = JobRow(plain->job.job.id);
    auto uow = Begin();
    auto launch = service::LaunchSpecFor(*uow, row);
    ASSERT_TRUE(launch.ok());
    EXPECT_FALSE(launch->contains("datasets"));
  }
}

TEST_F(DatasetsServiceTest, ACommandJobNamingADatasetItCannotReadIsRefusedAtSubmit) {
  const int64_t other_tenant = AddTenant("b");
  service::DatasetRecord importing;
  {
    auto uow = Begin();
    AddReadyVersion(*uow, tenant_, "lift");
    AddReadyVersion(*uow, other_tenant, "secret");
    service::DatasetRecord d;
    d.tenant_id = tenant_;
    d.name = "pending";
    d.source = {{"path", "/shared/p.hdf5"}};
    importing = *uow->datasets().Insert(d, 1000);
    ASSERT_TRUE(uow->Commit().ok());
  }
  const int64_t before = CountJobs();
  auto jobs = Jobs();
  struct Case {
    json datasets;
    std::string field, message;
  };
  for (const Case& c : std::vector<Case>{
           // Another tenant's dataset is not there for this one.
           {{"dataset:lift", "dataset:secret"}, "datasets[1]", "has no ready version"},
           {{"dataset:lift@2"}, "datasets[0]", "version 2 not found"},
           {{"dataset:pending@1"}, "datasets[0]", "is importing, not ready"},
           {{"dataset:pending"}, "datasets[0]", "has no ready version"}}) {
    auto sub = jobs.Submit(member_, CommandWithDatasets(c.datasets), "");
    EXPECT_EQ(sub.status().code(), common::Code::kUnprocessable) << c.datasets.dump();
    EXPECT_EQ(sub.status().field(), c.field) << c.datasets.dump();
    EXPECT_NE(sub.status().message().find(c.message), std::string::npos) << sub.status().message();
  }
  // A malformed reference is the parser's 400, before any lookup.
  auto dir = jobs.Submit(member_, CommandWithDatasets({"dir:/data/x"}), "");
  EXPECT_EQ(dir.status().code(), common::Code::kInvalidArgument);
  EXPECT_EQ(dir.status().field(), "datasets[0]");
  EXPECT_EQ(CountJobs(), before);  // nothing of the refused submissions was written
}

// A ready OCI image version of `name` in `tenant`, as a finished import-oci leaves it.
service::DatasetRecord AddReadyImage(service::UnitOfWork& uow, int64_t tenant,
                                     const std::string& name, const std::string& digest,
                                     int64_t token_id = 0) {
  service::DatasetRecord d;
  d.tenant_id = tenant;
  d.token_id = token_id;
  d.name = name;
  d.source = {{"format", "oci"}, {"path", "/shared/" + name + ".tar"}};
  auto in = uow.datasets().Insert(d, 1000);
  EXPECT_TRUE(in.ok()) << in.status().ToString();
  in->state = service::kDatasetReady;
  in->path = "/data/tenant-" + std::to_string(tenant) + "/dataset-" + std::to_string(in->id);
  in->manifest = {{"format", "oci"},
                  {"image", {{"digest", digest}, {"bytes", 10}, {"layers", 1}}},
                  {"stats", {{"episodes", 0}, {"frames", 0}}},
                  {"keys", json::array()},
                  {"shards", json::array()}};
  EXPECT_TRUE(uow.datasets().Update(*in, 1000).ok());
  return *in;
}

std::string CommandInImage(const std::string& image, const json& datasets = json()) {
  json j{{"name", "byo"},
         {"kind", "command"},
         {"command", {"/bin/train"}},
         {"resources", {{"nodes", 1}}},
         {"environment", {{"image", image}}}};
  if (!datasets.is_null()) j["datasets"] = datasets;
  return j.dump();
}

TEST_F(DatasetsServiceTest, AnImageJobIsBoundToItsImageAndLaunchedWithItsDirectoryAndDigest) {
  const std::string digest = "sha256:" + std::string(64, 'a');
  service::DatasetRecord image, lift;
  {
    auto uow = Begin();
    image = AddReadyImage(*uow, tenant_, "torch", digest, member_.token_id);
    lift = AddReadyVersion(*uow, tenant_, "lift");
    ASSERT_TRUE(uow->Commit().ok());
  }
  auto sub = Jobs().Submit(member_, CommandInImage("torch", json({"dataset:lift"})), "");
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  const int64_t id = sub->job.job.id;
  EXPECT_EQ(sub->job.job.spec["environment"], json({{"image", "torch"}}));  // as given
  {
    const service::JobRecord row = JobRow(id);
    auto uow = Begin();
    auto launch = service::LaunchSpecFor(*uow, row);
    ASSERT_TRUE(launch.ok()) << launch.status().ToString();
    // The image is not one of the ranks' datasets.
    EXPECT_EQ((*launch)["datasets"], json({{"lift@1", lift.path}}));
    EXPECT_EQ((*launch)["environment"]["image"],
              json({{"name", "torch@1"}, {"path", image.path}, {"digest", digest}}));
  }
  // The image a live job runs in is not deleted.
  EXPECT_EQ(Datasets().Delete(member_, image.id).status().code(),
            common::Code::kFailedPrecondition);
}

TEST_F(DatasetsServiceTest, AnImageThatIsNotThereOrNotAnImageIsRefusedAtSubmit) {
  {
    auto uow = Begin();
    AddReadyImage(*uow, tenant_, "torch", "sha256:" + std::string(64, 'b'));
    AddReadyVersion(*uow, tenant_, "lift");
    ASSERT_TRUE(uow->Commit().ok());
  }
  const int64_t before = CountJobs();
  auto jobs = Jobs();
  struct Case {
    std::string body, field, message;
  };
  for (const Case& c : std::vector<Case>{
           {CommandInImage("nope"), "environment.image", "\"nope\" has no ready version"},
           {CommandInImage("torch@2"), "environment.image", "version 2 not found"},
           {CommandInImage("lift"), "environment.image", "is not an OCI image"},
           {CommandInImage("torch", json({"dataset:torch"})), "datasets[0]",
            "name it as environment.image"}}) {
    auto sub = jobs.Submit(member_, c.body, "");
    EXPECT_EQ(sub.status().code(), common::Code::kUnprocessable) << c.body;
    EXPECT_EQ(sub.status().field(), c.field) << c.body;
    EXPECT_NE(sub.status().message().find(c.message), std::string::npos) << sub.status().message();
  }
  EXPECT_EQ(CountJobs(), before);
}

TEST_F(DatasetsServiceTest, AnImageImportMustReportAnImageManifest) {
  json oci{{"format", "oci"},
           {"image", {{"digest", "sha256:" + std::string(64, 'c')}, {"bytes", 5}, {"layers", 1}}},
           {"stats", {{"episodes", 0}, {"frames", 0}}}};
  EXPECT_EQ(*service::CheckManifest(oci), 5);
  oci["image"]["digest"] = "sha256:xyz";
  EXPECT_EQ(service::CheckManifest(oci).status().field(), "manifest.image");
  oci["image"].erase("digest");
  EXPECT_FALSE(service::CheckManifest(oci).ok());
}

}  // namespace
}  // namespace controlplane
