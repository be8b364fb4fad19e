// Datasets against a real PostgreSQL (label pg): versions per (tenant, name), tenant scoping, the
// import job's life carried into the dataset's state through the heartbeat (manifest, progress,
// errors, cancel), training jobs naming "dataset:NAME[@VERSION]" resolved at submit and launched
// with the version's directory, and delete with its refusals.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "controlplane/service/dataset_lifecycle.h"
#include "controlplane/service/datasets_service.h"
#include "controlplane/service/jobs_service.h"
#include "controlplane/service/node_service.h"
#include "controlplane/service/scheduler_loop.h"
#include "controlplane/testing/pg_database_fixture.h"

namespace controlplane {
namespace {

using nlohmann::json;
using service::Principal;

json Manifest(int episodes, int frames) {
  return json{{"shards", {{{"file", "shard-00000.embs"}, {"episodes", episodes}, {"bytes", 1000}},
                          {{"file", "shard-00001.embs"}, {"episodes", 0}, {"bytes", 24}}}},
              {"stats", {{"episodes", episodes}, {"frames", frames}, {"token_histogram", {{"40", 3}}}}},
              {"keys", {{{"name", "actions"}, {"dtype", "f32"}, {"shape", {7}}},
                        {{"name", "obs/agentview_image"}, {"dtype", "u8"}, {"shape", {84, 84, 3}}},
                        {{"name", "obs/state"}, {"dtype", "f32"}, {"shape", {26}}}}},
              {"source", {{"type", "hdf5"}}}};
}

class DatasetsPgTest : public testing::PgDatabaseTest {
 protected:
  void SetUp() override {
    OpenFreshDatabase("datasets");
    if (HasFatalFailure()) return;
    root_ = data_dir_ + "/datasets";
    std::filesystem::create_directories(root_);
  }

  service::DatasetsService Datasets(const std::string& root) {
    return service::DatasetsService(*database_, root, [this] { return now_.load(); }, nullptr);
  }
  service::JobsService Jobs() {
    return service::JobsService(*database_, api::SpecLimits{}, [this] { return now_.load(); },
                                nullptr);
  }
  static std::string ImportBody(const std::string& name, const std::string& path = "/d/lift.hdf5") {
    return json{{"name", name}, {"source", {{"path", path}}}}.dump();
  }
  static std::string TrainBody(const std::string& dataset) {
    return json{{"name", "train"}, {"kind", "train"}, {"resources", {{"nodes", 1}}},
                {"engine", {{"data", {{"dataset", dataset}}}}}}
        .dump();
  }

  // A node of tenant `t`'s cluster with its credential, and a scheduler.
  struct Cluster {
    std::unique_ptr<service::LogFiles> files;
    std::unique_ptr<service::NodeService> nodes;
    std::unique_ptr<service::SchedulerLoop> loop;
    Principal agent;
    int64_t node_id = 0;
  };
  Cluster StartCluster(const Principal& t) {
    Cluster c;
    auto clock = [this] { return now_.load(); };
    c.files = std::make_unique<service::LogFiles>(data_dir_);
    c.nodes = std::make_unique<service::NodeService>(*database_, *c.files, 1000, clock, nullptr);
    c.loop = std::make_unique<service::SchedulerLoop>(*database_,
                                                      service::SchedulerLoop::Options{1000, 500},
                                                      clock, nullptr, nullptr);
    api::RegisterRequest reg{"node-a", "127.0.0.1", "http://127.0.0.1:1", 4, 0, {}};
    auto node = c.nodes->Register(Person(t.tenant_id, t.tenant, "agent", 0), reg);
    EXPECT_TRUE(node.ok()) << node.status().ToString();
    c.node_id = node->node_id;
    c.agent = Person(t.tenant_id, t.tenant, "node", 0);
    c.agent.node_id = node->node_id;
    return c;
  }
  // Schedules what is pending and returns the launches the node gets.
  std::vector<api::Command> Launches(Cluster& c) {
    EXPECT_TRUE(c.loop->RunOnce().ok());
    auto hb = c.nodes->Heartbeat(c.agent, c.node_id, {});
    EXPECT_TRUE(hb.ok()) << hb.status().ToString();
    return hb.ok() ? hb->commands : std::vector<api::Command>{};
  }
  void Report(Cluster& c, const api::HeartbeatRequest& req) {
    auto hb = c.nodes->Heartbeat(c.agent, c.node_id, req);
    ASSERT_TRUE(hb.ok()) << hb.status().ToString();
  }

  std::string root_;
};

TEST_F(DatasetsPgTest, ImportNeedsARootAValidBodyAndAWriter) {
  Principal a = MakeTenant("a");
  StartCluster(a);
  auto none = Datasets("").Import(a, ImportBody("lift"));
  EXPECT_EQ(none.status().code(), common::Code::kFailedPrecondition);
  EXPECT_NE(none.status().message().find("--dataset-root"), std::string::npos);
  auto ds = Datasets(root_);
  EXPECT_EQ(ds.Import(a, "nope").status().code(), common::Code::kInvalidArgument);
  EXPECT_EQ(ds.Import(a, R"({"source":{"path":"/x"}})").status().field(), "name");
  EXPECT_EQ(ds.Import(a, ImportBody("a b")).status().field(), "name");
  EXPECT_EQ(ds.Import(a, ImportBody("lift", "/d/../etc/shadow")).status().field(), "source.path");
  EXPECT_EQ(ds.Import(a, ImportBody("lift", "d.hdf5")).status().field(), "source.path");
  EXPECT_EQ(ds.Import(a, R"({"name":"x","source":{"path":"/x"},"extra":1})").status().field(),
            "extra");
  Principal viewer = Person(a.tenant_id, "a", "viewer", 2);
  EXPECT_EQ(ds.Import(viewer, ImportBody("lift")).status().code(),
            common::Code::kPermissionDenied);
  // Nothing of the refusals was stored.
  EXPECT_EQ(ds.List(a, 50, "", "", 0)->datasets.size(), 0u);
  // A client cannot submit an import job of its own.
  json imp{{"name", "i"}, {"kind", "import"}, {"resources", {{"nodes", 1}}},
           {"import", {{"dataset_id", 1}, {"source", {{"path", "/x"}}}}}};
  auto direct = Jobs().Submit(a, imp.dump(), "");
  EXPECT_EQ(direct.status().code(), common::Code::kUnprocessable);
  EXPECT_EQ(direct.status().field(), "kind");
}

TEST_F(DatasetsPgTest, VersionsCountUpPerTenantAndNameAndListsAreScoped) {
  Principal a = MakeTenant("a"), b = MakeTenant("b");
  StartCluster(a);
  auto ds = Datasets(root_);
  auto a1 = ds.Import(a, ImportBody("lift"));
  auto a2 = ds.Import(a, ImportBody("lift"));
  auto a_can = ds.Import(a, ImportBody("can"));
  auto b1 = ds.Import(b, ImportBody("lift"));
  ASSERT_TRUE(a1.ok() && a2.ok() && a_can.ok() && b1.ok()) << a1.status().ToString();
  EXPECT_EQ(a1->version, 1);
  EXPECT_EQ(a2->version, 2);
  EXPECT_EQ(a_can->version, 1);
  EXPECT_EQ(b1->version, 1);
  EXPECT_EQ(a1->state, "importing");
  const int64_t id = a1->id;
  EXPECT_EQ(a1->path, root_ + "/tenant-" + std::to_string(a.tenant_id) + "/dataset-" +
                               std::to_string(id));
  // The import is a job of the same tenant, kind import, one cpu rank.
  auto job = Jobs().Get(a, *a1->job_id);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->job.kind, "import");
  EXPECT_EQ(job->job.name, "import-lift-v1");
  EXPECT_EQ(job->job.spec["import"]["dataset_id"], id);
  EXPECT_EQ(job->job.spec["import"]["source"]["path"], "/d/lift.hdf5");
  EXPECT_EQ(job->job.spec["resources"]["nodes"], 1);

  auto list_a = ds.List(a, 50, "", "", 0);
  ASSERT_TRUE(list_a.ok());
  EXPECT_EQ(list_a->datasets.size(), 3u);
  EXPECT_EQ(ds.List(a, 50, "", "lift", 0)->datasets.size(), 2u);
  EXPECT_EQ(ds.List(a, 50, "", "", b.tenant_id)->datasets.size(), 0u);
  auto page = ds.List(a, 2, "", "", 0);
  ASSERT_EQ(page->datasets.size(), 2u);
  auto rest = ds.List(a, 2, *page->next_cursor, "", 0);
  ASSERT_EQ(rest->datasets.size(), 1u);
  EXPECT_FALSE(rest->next_cursor.has_value());
  // Another tenant's dataset is not found, the same as a missing one.
  EXPECT_EQ(ds.Get(b, id).status().code(), common::Code::kNotFound);
  EXPECT_EQ(ds.Delete(b, id).status().code(), common::Code::kNotFound);
  Principal admin = Person(a.tenant_id, "a", "cluster-admin", 9);
  EXPECT_EQ(ds.List(admin, 50, "", "", 0)->datasets.size(), 4u);
  EXPECT_EQ(ds.List(admin, 50, "", "", b.tenant_id)->datasets.size(), 1u);
  EXPECT_EQ(ds.List(a, 0, "", "", 0).status().field(), "limit");
}

TEST_F(DatasetsPgTest, ImportJobCarriesTheDatasetToReadyAndTrainingReadsIt) {
  Principal a = MakeTenant("a"), b = MakeTenant("b");
  Cluster c = StartCluster(a);
  auto ds = Datasets(root_);
  auto jobs = Jobs();
  // Nothing to train on yet.
  auto early = jobs.Submit(a, TrainBody("dataset:lift"), "");
  EXPECT_EQ(early.status().code(), common::Code::kUnprocessable);
  EXPECT_EQ(early.status().field(), "engine.data.dataset");

  auto d = ds.Import(a, ImportBody("lift"));
  ASSERT_TRUE(d.ok());
  const int64_t id = d->id, job_id = *d->job_id;
  // An importing version is not trainable either.
  EXPECT_EQ(jobs.Submit(a, TrainBody("dataset:lift@1"), "").status().code(),
            common::Code::kUnprocessable);

  auto launches = Launches(c);
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].job_id, job_id);
  EXPECT_EQ(launches[0].tenant_id, a.tenant_id);
  EXPECT_EQ(launches[0].spec["kind"], "import");

  api::HeartbeatRequest progress;
  progress.running = {job_id};
  progress.events = {{job_id, 0, "progress", {{"fraction", 0.5}}}};
  Report(c, progress);
  EXPECT_EQ(ds.Get(a, id)->progress, 0.5);

  api::HeartbeatRequest done;
  done.events = {{job_id, 0, "dataset", {{"manifest", Manifest(3, 36)}}}};
  done.finished = {{job_id, 0, ""}};
  Report(c, done);
  auto ready = ds.Get(a, id);
  ASSERT_TRUE(ready.ok());
  EXPECT_EQ(ready->dataset.state, "ready") << api::v1::ToJson(*ready).dump();
  EXPECT_EQ(ready->dataset.episodes, 3);
  EXPECT_EQ(ready->dataset.frames, 36);
  EXPECT_EQ(ready->dataset.bytes, 1024);
  EXPECT_EQ(ready->progress, 1.0);
  EXPECT_EQ(ready->manifest["stats"]["token_histogram"]["40"], 3);

  // Training: resolved within the tenant, launched with the directory, displayed by name.
  EXPECT_EQ(jobs.Submit(b, TrainBody("dataset:lift"), "").status().code(),
            common::Code::kUnprocessable);
  EXPECT_EQ(jobs.Submit(a, TrainBody("dataset:lift@2"), "").status().code(),
            common::Code::kUnprocessable);
  // A model that cannot train on it is refused at submit, naming both sides.
  json wide = json::parse(TrainBody("dataset:lift@1"));
  wide["engine"]["model"]["action_dim"] = 14;
  auto misfit = jobs.Submit(a, wide.dump(), "");
  EXPECT_EQ(misfit.status().code(), common::Code::kInvalidArgument);
  EXPECT_EQ(misfit.status().field(), "engine.model.action_dim");
  EXPECT_NE(misfit.status().message().find("dataset lift@1"), std::string::npos);
  EXPECT_NE(misfit.status().message().find("have 7 dimensions but engine.model.action_dim is 14"),
            std::string::npos)
      << misfit.status().message();
  json no_camera = json::parse(TrainBody("dataset:lift@1"));
  no_camera["engine"]["data"]["cameras"] = {"wrist"};
  EXPECT_EQ(jobs.Submit(a, no_camera.dump(), "").status().field(), "engine.data.cameras");
  auto train = jobs.Submit(a, TrainBody("dataset:lift@1"), "");
  ASSERT_TRUE(train.ok()) << train.status().ToString();
  EXPECT_EQ(train->job.job.spec["engine"]["data"]["dataset"], "dataset:lift@1");
  auto train_launch = Launches(c);
  ASSERT_EQ(train_launch.size(), 1u);
  EXPECT_EQ(train_launch[0].spec["engine"]["data"]["dataset"], "dir:" + ready->dataset.path);

  // Delete: refused while the training job has not ended; then the directory goes too.
  std::filesystem::create_directories(ready->dataset.path);
  std::ofstream(ready->dataset.path + "/dataset.json") << "{}";
  EXPECT_EQ(ds.Delete(a, id).status().code(), common::Code::kFailedPrecondition);
  api::HeartbeatRequest trained;
  trained.finished = {{train->job.job.id, 0, ""}};
  Report(c, trained);
  Principal other_member = Person(a.tenant_id, "a", "member", 77);
  EXPECT_EQ(ds.Delete(other_member, id).status().code(), common::Code::kPermissionDenied);
  auto deleted = ds.Delete(a, id);
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EXPECT_EQ(deleted->state, "deleted");
  EXPECT_EQ(deleted->directory_removed, true);
  EXPECT_FALSE(std::filesystem::exists(ready->dataset.path));
  EXPECT_EQ(ds.List(a, 50, "", "", 0)->datasets.size(), 0u);
  EXPECT_EQ(jobs.Submit(a, TrainBody("dataset:lift"), "").status().code(),
            common::Code::kUnprocessable);
  // A deleted version keeps its number.
  EXPECT_EQ(ds.Import(a, ImportBody("lift"))->version, 2);
}

TEST_F(DatasetsPgTest, FailuresEndTheDatasetFailedWithTheirReason) {
  Principal a = MakeTenant("a");
  Cluster c = StartCluster(a);
  auto ds = Datasets(root_);
  auto bad = ds.Import(a, ImportBody("bad"));
  auto silent = ds.Import(a, ImportBody("silent"));
  auto malformed = ds.Import(a, ImportBody("malformed"));
  auto cancelled = ds.Import(a, ImportBody("cancelled"));
  ASSERT_TRUE(bad.ok() && silent.ok() && malformed.ok() && cancelled.ok());
  ASSERT_EQ(Launches(c).size(), 4u);
  const int64_t bad_job = *bad->job_id, silent_job = *silent->job_id,
                malformed_job = *malformed->job_id;
  api::HeartbeatRequest r;
  r.events = {{bad_job, 0, "dataset", {{"error", "/d/lift.hdf5: demo_3: NaN in actions"}}},
              {malformed_job, 0, "dataset", {{"manifest", {{"stats", {{"episodes", -1}}}}}}}};
  r.finished = {{bad_job, 1, ""}, {silent_job, 0, ""}, {malformed_job, 0, ""}};
  Report(c, r);
  auto b = *ds.Get(a, bad->id);
  EXPECT_EQ(b.dataset.state, "failed");
  EXPECT_EQ(b.dataset.error, "/d/lift.hdf5: demo_3: NaN in actions");
  auto s = *ds.Get(a, silent->id);
  EXPECT_EQ(s.dataset.state, "failed");
  EXPECT_NE(s.dataset.error.find("without reporting a manifest"), std::string::npos);
  auto m = *ds.Get(a, malformed->id);
  EXPECT_EQ(m.dataset.state, "failed");
  EXPECT_NE(m.dataset.error.find("malformed manifest"), std::string::npos);
  EXPECT_TRUE(m.manifest.is_null());

  // Cancelling the import job fails the dataset; an importing one cannot be deleted before.
  EXPECT_EQ(ds.Delete(a, cancelled->id).status().code(), common::Code::kFailedPrecondition);
  auto cancel = Jobs().Cancel(a, *cancelled->job_id);
  ASSERT_TRUE(cancel.ok());
  api::HeartbeatRequest killed;
  killed.finished = {{*cancelled->job_id, 143, "killed on cancel", true}};
  Report(c, killed);
  auto cd = *ds.Get(a, cancelled->id);
  EXPECT_EQ(cd.dataset.state, "failed");
  EXPECT_NE(cd.dataset.error.find("CANCELLED"), std::string::npos) << api::v1::ToJson(cd).dump();
  EXPECT_TRUE(ds.Delete(a, cancelled->id).ok());
}

TEST(DatasetManifestTest, ShapeIsChecked) {
  EXPECT_EQ(*service::CheckManifest(Manifest(3, 36)), 1024);
  EXPECT_FALSE(service::CheckManifest(json::array()).ok());
  EXPECT_FALSE(service::CheckManifest(json{{"stats", {{"episodes", 1}}}, {"shards", json::array()}}).ok());
  json no_bytes = Manifest(1, 1);
  no_bytes["shards"][0].erase("bytes");
  EXPECT_FALSE(service::CheckManifest(no_bytes).ok());
  json huge = Manifest(1, 1);
  huge["pad"] = std::string(service::kMaxManifestBytes, 'x');
  EXPECT_FALSE(service::CheckManifest(huge).ok());
}

}  // namespace
}  // namespace controlplane
