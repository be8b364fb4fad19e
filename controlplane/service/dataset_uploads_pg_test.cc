// Dataset uploads against a real PostgreSQL (label pg): the uploading state and its bounds (no
// uploads kept, the size limit, the per-tenant cap), chunks at, before and past the bytes held
// (a retried chunk, an overlap, a gap), who may upload (the uploader, a tenant-admin, a
// cluster-admin; another tenant's people see nothing), a commit with the wrong SHA-256 keeping the
// upload, the commit queueing the import job, the agent's download only on the node that import
// runs on, the blob leaving once the import ended or the version was deleted, and the sweep of
// abandoned uploads.
#include <gtest/gtest.h>

#include <filesystem>

#include "common/crypto.h"
#include "controlplane/service/dataset_uploads.h"
#include "controlplane/service/datasets_service.h"
#include "controlplane/service/node_service.h"
#include "controlplane/service/scheduler_loop.h"
#include "controlplane/testing/pg_database_fixture.h"

namespace controlplane {
namespace {

using nlohmann::json;
using service::Principal;

class DatasetUploadsPgTest : public testing::PgDatabaseTest {
 protected:
  void SetUp() override {
    OpenFreshDatabase("dsupload");
    if (HasFatalFailure()) return;
    root_ = data_dir_ + "/datasets";
    std::filesystem::create_directories(root_);
    files_ = std::make_unique<service::DatasetUploadFiles>(data_dir_ + "/server");
    limits_.max_bytes = 1000;
    limits_.max_per_tenant = 2;
    limits_.max_chunk_bytes = 64;
    limits_.ttl_ms = 60'000;
    uploads_ = std::make_unique<service::DatasetUploads>(
        *database_, *files_, limits_, root_, [this] { return now_.load(); }, nullptr);
    datasets_ = std::make_unique<service::DatasetsService>(
        *database_, root_, [this] { return now_.load(); }, nullptr, uploads_.get());
  }

  static std::string UploadBody(const std::string& name, const std::string& content) {
    return json{{"name", name},
                {"source",
                 {{"upload", {{"bytes", content.size()}, {"sha256", common::Sha256Hex(content)}}},
                  {"filter", "train"}}}}
        .dump();
  }
  // Starts an upload of `content` as `p`; returns the version's id (0 on failure).
  int64_t Start(const Principal& p, const std::string& name, const std::string& content) {
    auto r = datasets_->Import(p, UploadBody(name, content));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return 0;
    EXPECT_EQ(r->state, "uploading");
    EXPECT_FALSE(r->job_id.has_value());
    return r->id;
  }
  common::Result<api::v1::DatasetUploadProgress> Put(const Principal& p, int64_t id,
                                                     int64_t offset, const std::string& data,
                                                     const std::string& sha = "") {
    return uploads_->PutChunk(p, id, offset, sha, data);
  }

  struct Cluster {
    std::unique_ptr<service::LogFiles> logs;
    std::unique_ptr<service::NodeService> nodes;
    std::unique_ptr<service::SchedulerLoop> loop;
    Principal node;
    int64_t node_id = 0;
  };
  Cluster StartCluster(const Principal& t, const std::string& name = "node-a", int slots = 4) {
    Cluster c;
    auto clock = [this] { return now_.load(); };
    c.logs = std::make_unique<service::LogFiles>(data_dir_);
    c.nodes = std::make_unique<service::NodeService>(*database_, *c.logs, 1000, clock, nullptr);
    c.loop = std::make_unique<service::SchedulerLoop>(
        *database_, service::SchedulerLoop::Options{1000, 500}, clock, nullptr, nullptr);
    api::RegisterRequest reg{name, "127.0.0.1", "http://127.0.0.1:1", slots, 0, {}};
    auto node = c.nodes->Register(Person(t.tenant_id, t.tenant, "agent", 0), reg);
    EXPECT_TRUE(node.ok()) << node.status().ToString();
    c.node_id = node->node_id;
    c.node = Person(t.tenant_id, t.tenant, "node", 0);
    c.node.node_id = node->node_id;
    return c;
  }
  std::vector<api::Command> Launches(Cluster& c) {
    EXPECT_TRUE(c.loop->RunOnce().ok());
    auto hb = c.nodes->Heartbeat(c.node, c.node_id, {});
    EXPECT_TRUE(hb.ok()) << hb.status().ToString();
    return hb.ok() ? hb->commands : std::vector<api::Command>{};
  }

  std::string root_;
  service::DatasetUploadLimits limits_;
  std::unique_ptr<service::DatasetUploadFiles> files_;
  std::unique_ptr<service::DatasetUploads> uploads_;
  std::unique_ptr<service::DatasetsService> datasets_;
};

TEST_F(DatasetUploadsPgTest, StartIsBoundedAndRefusedWithoutAPlaceForUploads) {
  Principal a = MakeTenant("a");
  // A server without uploads names the flag that turns them on.
  service::DatasetsService no_uploads(*database_, root_, [this] { return now_.load(); }, nullptr);
  auto refused = no_uploads.Import(a, UploadBody("lift", "abc"));
  EXPECT_EQ(refused.status().code(), common::Code::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("--dataset-upload-max-gib"), std::string::npos);

  Principal viewer = Person(a.tenant_id, "a", "viewer", 5);
  EXPECT_EQ(datasets_->Import(viewer, UploadBody("lift", "abc")).status().code(),
            common::Code::kPermissionDenied);
  auto big = datasets_->Import(a, UploadBody("lift", std::string(1001, 'x')));
  EXPECT_EQ(big.status().code(), common::Code::kInvalidArgument);
  EXPECT_EQ(big.status().field(), "source.upload.bytes");
  // Both a path and an upload, or a bad digest: refused by the source's parser.
  auto both = datasets_->Import(
      a, json{{"name", "x"},
              {"source", {{"path", "/d/x.hdf5"}, {"upload", {{"bytes", 1}, {"sha256", std::string(64, 'a')}}}}}}
             .dump());
  EXPECT_EQ(both.status().code(), common::Code::kInvalidArgument);
  auto bad_sha = datasets_->Import(
      a, json{{"name", "x"}, {"source", {{"upload", {{"bytes", 1}, {"sha256", "ABC"}}}}}}.dump());
  EXPECT_EQ(bad_sha.status().field(), "source.upload.sha256");

  const int64_t first = Start(a, "lift", "abc");
  Start(a, "lift", "defg");
  auto third = datasets_->Import(a, UploadBody("can", "x"));
  EXPECT_EQ(third.status().code(), common::Code::kResourceExhausted);
  EXPECT_NE(third.status().message().find("--dataset-uploads-per-tenant"), std::string::npos);
  // The cap is per tenant, and a deleted upload frees its place.
  Principal b = MakeTenant("b");
  Start(b, "can", "x");
  ASSERT_TRUE(datasets_->Delete(a, first).ok());
  Start(a, "can", "x");
  // A path import is unaffected by the cap.
  Cluster c = StartCluster(a);
  auto path = datasets_->Import(a, json{{"name", "p"}, {"source", {{"path", "/d/p.hdf5"}}}}.dump());
  ASSERT_TRUE(path.ok()) << path.status().ToString();
  EXPECT_EQ(path->state, "importing");
}

TEST_F(DatasetUploadsPgTest, ChunksAppendAtTheSizeHeldAndARetryIsAnsweredWithIt) {
  Principal a = MakeTenant("a");
  const std::string content = "0123456789abcdefghij";  // 20 bytes
  const int64_t id = Start(a, "lift", content);
  auto first = Put(a, id, 0, content.substr(0, 8), common::Sha256Hex(content.substr(0, 8)));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->received_bytes, 8);
  // The same chunk again (its answer was lost): the size held, nothing written twice.
  auto again = Put(a, id, 0, content.substr(0, 8));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->received_bytes, 8);
  // An overlap with the same bytes appends only its tail.
  auto overlap = Put(a, id, 4, content.substr(4, 8));
  ASSERT_TRUE(overlap.ok()) << overlap.status().ToString();
  EXPECT_EQ(overlap->received_bytes, 12);
  // Different bytes over what is held, a gap, a chunk past the declared size, a damaged chunk,
  // a chunk over the cap: refused, nothing stored.
  EXPECT_EQ(Put(a, id, 0, "XXXX").status().code(), common::Code::kFailedPrecondition);
  EXPECT_EQ(Put(a, id, 10, "XXcd").status().code(), common::Code::kFailedPrecondition);
  EXPECT_EQ(Put(a, id, 14, "ef").status().code(), common::Code::kFailedPrecondition);  // gap
  EXPECT_EQ(Put(a, id, 12, content.substr(12) + "!").status().code(),
            common::Code::kInvalidArgument);
  auto damaged = Put(a, id, 12, "cdef", common::Sha256Hex("cdeX"));
  EXPECT_EQ(damaged.status().field(), "X-Content-Sha256");
  EXPECT_EQ(Put(a, id, 12, std::string(65, 'x')).status().code(), common::Code::kInvalidArgument);
  EXPECT_EQ(Put(a, id, -1, "x").status().field(), "offset");
  auto held = datasets_->Get(a, id);
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(held->dataset.received_bytes, 12);
  EXPECT_EQ(held->dataset.state, "uploading");
  EXPECT_EQ(std::filesystem::file_size(files_->PathOf(id)), 12u);

  // A commit before every byte arrived says how many are held.
  auto early = uploads_->Commit(a, id);
  EXPECT_EQ(early.status().code(), common::Code::kFailedPrecondition);
  EXPECT_NE(early.status().message().find("12 of 20"), std::string::npos);
  ASSERT_TRUE(Put(a, id, 12, content.substr(12)).ok());

  Cluster c = StartCluster(a);
  auto committed = uploads_->Commit(a, id);
  ASSERT_TRUE(committed.ok()) << committed.status().ToString();
  EXPECT_EQ(committed->state, "importing");
  ASSERT_TRUE(committed->job_id.has_value());
  const int64_t job_id = *committed->job_id;
  EXPECT_EQ(committed->path, service::DatasetsService::DirectoryOf(root_, a.tenant_id, id));
  // A repeated commit (its answer lost) answers the same version; no second job.
  auto repeated = uploads_->Commit(a, id);
  ASSERT_TRUE(repeated.ok()) << repeated.status().ToString();
  EXPECT_EQ(repeated->job_id, job_id);
  // Chunks after the commit are refused.
  EXPECT_EQ(Put(a, id, 20, "").status().code(), common::Code::kFailedPrecondition);

  auto launches = Launches(c);
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].job_id, job_id);
  const json source = launches[0].spec["import"]["source"];
  EXPECT_EQ(source["upload"]["bytes"], 20);
  EXPECT_EQ(source["upload"]["sha256"], common::Sha256Hex(content));
  EXPECT_EQ(source["filter"], "train");
  EXPECT_FALSE(source.contains("path"));
}

TEST_F(DatasetUploadsPgTest, OnlyTheUploaderATenantAdminOrAClusterAdminSendBytes) {
  Principal a = MakeTenant("a", "member", 1), b = MakeTenant("b", "member", 2);
  const int64_t id = Start(a, "lift", "abcdef");
  // Another tenant's people see nothing, as for a missing version.
  EXPECT_EQ(Put(b, id, 0, "ab").status().code(), common::Code::kNotFound);
  EXPECT_EQ(uploads_->Commit(b, id).status().code(), common::Code::kNotFound);
  EXPECT_EQ(Put(Person(b.tenant_id, "b", "tenant-admin", 3), id, 0, "ab").status().code(),
            common::Code::kNotFound);
  // Within the tenant: a viewer and another member may not; the tenant-admin may.
  EXPECT_EQ(Put(Person(a.tenant_id, "a", "viewer", 4), id, 0, "ab").status().code(),
            common::Code::kPermissionDenied);
  EXPECT_EQ(Put(Person(a.tenant_id, "a", "member", 5), id, 0, "ab").status().code(),
            common::Code::kPermissionDenied);
  EXPECT_EQ(Put(Person(a.tenant_id, "a", "agent", 0), id, 0, "ab").status().code(),
            common::Code::kPermissionDenied);
  ASSERT_TRUE(Put(Person(a.tenant_id, "a", "tenant-admin", 6), id, 0, "ab").ok());
  ASSERT_TRUE(Put(a, id, 2, "cd").ok());
  // A cluster-admin (of its own tenant) may too.
  ASSERT_TRUE(Put(Person(b.tenant_id, "b", "cluster-admin", 7), id, 4, "ef").ok());
  EXPECT_EQ(datasets_->Get(a, id)->dataset.received_bytes, 6);
  EXPECT_EQ(datasets_->Get(b, id).status().code(), common::Code::kNotFound);
}

TEST_F(DatasetUploadsPgTest, AWrongDigestKeepsTheUploadUntilItIsDeleted) {
  Principal a = MakeTenant("a");
  const int64_t id = Start(a, "lift", "the right bytes");
  ASSERT_TRUE(Put(a, id, 0, "the wrong bytes").ok());
  auto commit = uploads_->Commit(a, id);
  EXPECT_EQ(commit.status().code(), common::Code::kUnprocessable);
  EXPECT_EQ(commit.status().field(), "source.upload.sha256");
  auto kept = datasets_->Get(a, id);
  EXPECT_EQ(kept->dataset.state, "uploading");
  EXPECT_EQ(kept->dataset.received_bytes, 15);
  EXPECT_FALSE(kept->dataset.job_id.has_value());
  EXPECT_TRUE(std::filesystem::exists(files_->PathOf(id)));
  ASSERT_TRUE(uploads_->Sweep().ok());  // not abandoned yet: still there
  EXPECT_TRUE(std::filesystem::exists(files_->PathOf(id)));

  auto deleted = datasets_->Delete(a, id);
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EXPECT_EQ(deleted->state, "deleted");
  EXPECT_FALSE(std::filesystem::exists(files_->PathOf(id)));
  EXPECT_EQ(Put(a, id, 0, "x").status().code(), common::Code::kNotFound);
}

TEST_F(DatasetUploadsPgTest, OnlyTheImportingNodeDownloadsAndTheBlobGoesWhenTheImportEnds) {
  Principal a = MakeTenant("a");
  Cluster c = StartCluster(a, "node-a", 1);
  const std::string content = "hdf5 bytes, pretend";
  const int64_t id = Start(a, "lift", content);
  ASSERT_TRUE(Put(a, id, 0, content).ok());
  // Before the commit no node may read it; nor a person ever.
  EXPECT_EQ(uploads_->Open(c.node, id).status().code(), common::Code::kNotFound);
  EXPECT_EQ(uploads_->Open(a, id).status().code(), common::Code::kPermissionDenied);
  auto committed = uploads_->Commit(a, id);
  ASSERT_TRUE(committed.ok()) << committed.status().ToString();
  const int64_t job_id = *committed->job_id;
  // Committed but not yet placed: still nobody.
  EXPECT_EQ(uploads_->Open(c.node, id).status().code(), common::Code::kNotFound);
  ASSERT_EQ(Launches(c).size(), 1u);
  auto got = uploads_->Open(c.node, id);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->bytes, static_cast<int64_t>(content.size()));
  EXPECT_EQ(got->sha256, common::Sha256Hex(content));
  EXPECT_EQ(*got->reader->Read(0, 1 << 20), content);
  // A node the import job is not on.
  Principal other = c.node;
  other.node_id = c.node_id + 1000;
  EXPECT_EQ(uploads_->Open(other, id).status().code(), common::Code::kNotFound);

  // While the import runs the sweep keeps the blob; once the import ended (any outcome) it goes.
  ASSERT_TRUE(uploads_->Sweep().ok());
  EXPECT_TRUE(std::filesystem::exists(files_->PathOf(id)));
  api::HeartbeatRequest done;
  done.events = {{job_id, 0, "dataset", {{"error", "demo_0: NaN in actions"}}}};
  done.finished = {{job_id, 1, ""}};
  ASSERT_TRUE(c.nodes->Heartbeat(c.node, c.node_id, done).ok());
  EXPECT_EQ(datasets_->Get(a, id)->dataset.state, "failed");
  EXPECT_EQ(uploads_->Open(c.node, id).status().code(), common::Code::kNotFound);
  ASSERT_TRUE(uploads_->Sweep().ok());
  EXPECT_FALSE(std::filesystem::exists(files_->PathOf(id)));
}

TEST_F(DatasetUploadsPgTest, AnUploadUntouchedPastItsTtlIsSweptToFailed) {
  Principal a = MakeTenant("a");
  const int64_t idle = Start(a, "idle", "abcdef");
  ASSERT_TRUE(Put(a, idle, 0, "abc").ok());
  now_ += 40'000;
  const int64_t busy = Start(a, "busy", "abcdef");
  ASSERT_TRUE(Put(a, busy, 0, "abc").ok());
  now_ += 30'000;  // idle: 70 s untouched; busy: 30 s
  auto swept = uploads_->Sweep();
  ASSERT_TRUE(swept.ok()) << swept.status().ToString();
  EXPECT_EQ(*swept, 1);
  auto failed = *datasets_->Get(a, idle);
  EXPECT_EQ(failed.dataset.state, "failed");
  EXPECT_NE(failed.dataset.error.find("upload abandoned"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(files_->PathOf(idle)));
  EXPECT_EQ(datasets_->Get(a, busy)->dataset.state, "uploading");
  EXPECT_TRUE(std::filesystem::exists(files_->PathOf(busy)));
  EXPECT_EQ(Put(a, idle, 3, "def").status().code(), common::Code::kFailedPrecondition);
  // A swept upload no longer counts against the cap (2): a new one starts. A failed version can
  // be deleted.
  Start(a, "next", "x");
  EXPECT_TRUE(datasets_->Delete(a, idle).ok());
}

}  // namespace
}  // namespace controlplane
