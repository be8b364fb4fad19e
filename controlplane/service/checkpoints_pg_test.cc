// The checkpoint blob store's rules against a real PostgreSQL (label pg): who may upload, read
// and delete; a torn upload is never listed and a stale one is swept (rows and files); a SHA-256
// mismatch discards the upload; bounds per checkpoint, job and tenant (the server-wide one and the
// tenant's quota.storage_bytes, which counts its datasets too); retention keeps the newest
// `keep` plus the best by the spec's metric; a launch resumes from the latest ready upload or
// init_from; init_from of another tenant is not found at submit.
#include <filesystem>

#include <gtest/gtest.h>

#include "common/crypto.h"
#include "controlplane/service/auth.h"
#include "controlplane/service/checkpoints_service.h"
#include "controlplane/service/dataset_store.h"
#include "controlplane/service/node_service.h"
#include "controlplane/testing/pg_database_fixture.h"

namespace controlplane {
namespace {

using nlohmann::json;
using service::Principal;

class CheckpointsPgTest : public testing::PgDatabaseTest {
 protected:
  void SetUp() override {
    OpenFreshDatabase("ckpt");
    if (HasFatalFailure()) return;
    files_ = std::make_unique<service::CheckpointFiles>(data_dir_);
    logs_ = std::make_unique<service::LogFiles>(data_dir_);
    member_ = AddTenant("acme", "member");
    other_ = AddTenant("globex", "member");
    join_ = member_;
    join_.role = "agent";
    service::NodeService nodes(
        *database_, *logs_, 1000, [this] { return now_.load(); }, nullptr);
    node_a_ = RegisterNode(nodes, "node-a");
    node_b_ = RegisterNode(nodes, "node-b");
  }

  Principal AddTenant(const std::string& name, const std::string& role) {
    auto uow = database_->Begin();
    EXPECT_TRUE(uow.ok());
    service::TenantRecord t;
    t.name = name;
    auto id = (*uow)->tenants().CreateTenant(t, now_.load());
    EXPECT_TRUE(id.ok() && (*uow)->Commit().ok());
    Principal p;
    p.tenant_id = id.ok() ? *id : 0;
    p.tenant = name;
    p.role = role;
    p.token_name = role;
    return p;
  }

  Principal RegisterNode(service::NodeService& nodes, const std::string& name) {
    api::RegisterRequest reg{name, "127.0.0.1", "http://127.0.0.1:1", 2, 0, {}};
    auto node = nodes.Register(join_, reg);
    EXPECT_TRUE(node.ok()) << node.status().ToString();
    auto p = service::Authenticate(*database_, "Bearer " + node->node_token, now_.load());
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return *p;
  }

  // A job of `owner`'s tenant placed on `node` (no scheduler: the allocation is written here).
  int64_t PlacedJob(const Principal& owner, const Principal& node, const std::string& extra = "") {
    service::JobsService jobs(
        *database_, api::SpecLimits{}, [this] { return now_.load(); }, nullptr);
    const std::string spec = R"({"name":"j","kind":"train","resources":{"nodes":1},)"
                             R"("engine":{"checkpoint":{"keep":2)" +
                             extra + "}}}";
    auto r = jobs.Submit(owner, spec, "");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return 0;
    auto uow = database_->Begin();
    service::AllocationRecord a;
    a.job_id = r->job.job.id;
    a.node_id = node.node_id;
    a.ranks = 1;
    a.slots = 1;
    a.slot_type = "cpu";
    a.is_head = true;
    EXPECT_TRUE((*uow)->allocations().Insert(a).ok());
    EXPECT_TRUE((*uow)->Commit().ok());
    return r->job.job.id;
  }

  service::CheckpointsService Service(service::CheckpointLimits limits = {}) {
    limits.upload_ttl_ms = 60'000;
    return service::CheckpointsService(*database_, *files_, limits, [this] { return now_.load(); });
  }

  // Starts, sends in 3-byte chunks, and commits; returns the commit's result.
  common::Result<api::v1::Checkpoint> Upload(service::CheckpointsService& s, const Principal& p,
                                             int64_t job, int64_t step, const std::string& data,
                                             json metrics = json::object(), bool commit = true) {
    json start = {{"step", step},
                  {"bytes", data.size()},
                  {"sha256", common::Sha256Hex(data)},
                  {"metrics", metrics}};
    EMBODY_ASSIGN_OR_RETURN(entry, s.StartUpload(p, job, start.dump()));
    const int64_t id = entry.id;
    for (size_t off = 0; off < data.size(); off += 3) {
      std::string chunk = data.substr(off, 3);
      EMBODY_ASSIGN_OR_RETURN(r, s.PutChunk(p, job, id, off, common::Sha256Hex(chunk), chunk));
      (void)r;
    }
    if (!commit) return entry;
    return s.Commit(p, job, id);
  }

  std::vector<int64_t> ListedSteps(service::CheckpointsService& s, int64_t job) {
    auto l = s.List(member_, job);
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    std::vector<int64_t> out;
    if (l.ok())
      for (const auto& c : l->checkpoints) out.push_back(c.step);
    return out;
  }

  std::unique_ptr<service::CheckpointFiles> files_;
  std::unique_ptr<service::LogFiles> logs_;
  Principal member_, other_, join_, node_a_, node_b_;
};

TEST_F(CheckpointsPgTest, RoundTripAndWhoMay) {
  auto s = Service();
  const int64_t job = PlacedJob(member_, node_a_);
  auto up = Upload(s, node_a_, job, 10, "checkpoint bytes");
  ASSERT_TRUE(up.ok()) << up.status().ToString();
  EXPECT_EQ(up->state, "ready");
  const int64_t id = up->id;

  auto d = s.OpenData(member_, job, id);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(*d->reader->Read(0, 100), "checkpoint bytes");
  EXPECT_EQ(*d->reader->Read(11, 100), "bytes");
  Principal viewer = member_;
  viewer.role = "viewer";
  EXPECT_TRUE(s.List(viewer, job).ok());
  EXPECT_TRUE(s.OpenData(node_a_, job, id).ok());

  // Another tenant and a node the job is not on: not found. A person cannot upload.
  EXPECT_EQ(s.List(other_, job).status().code(), common::Code::kNotFound);
  EXPECT_EQ(s.OpenData(other_, job, id).status().code(), common::Code::kNotFound);
  EXPECT_EQ(s.OpenData(node_b_, job, id).status().code(), common::Code::kNotFound);
  EXPECT_EQ(Upload(s, node_b_, job, 11, "x").status().code(), common::Code::kNotFound);
  EXPECT_EQ(Upload(s, member_, job, 11, "x").status().code(), common::Code::kPermissionDenied);
  EXPECT_EQ(s.Delete(viewer, job, id).code(), common::Code::kPermissionDenied);
  EXPECT_EQ(s.Delete(other_, job, id).code(), common::Code::kNotFound);
  // A checkpoint id under another job's path is not found either.
  const int64_t job2 = PlacedJob(member_, node_a_);
  EXPECT_EQ(s.OpenData(member_, job2, id).status().code(), common::Code::kNotFound);
  ASSERT_TRUE(s.Delete(member_, job, id).ok());
  EXPECT_TRUE(ListedSteps(s, job).empty());
}

// A node's rights are scoped to now: once the job ended and its placement was released, the
// node that ran it cannot download its checkpoints any more; it may still upload the last one
// for an hour (the agent uploads after the exit), and never deletes one.
TEST_F(CheckpointsPgTest, ANodeActsOnlyForJobsPlacedOnItNow) {
  auto s = Service();
  const int64_t job = PlacedJob(member_, node_a_);
  auto up = Upload(s, node_a_, job, 10, "checkpoint bytes");
  ASSERT_TRUE(up.ok()) << up.status().ToString();
  const int64_t id = up->id;
  EXPECT_EQ(s.Delete(node_a_, job, id).code(), common::Code::kPermissionDenied);
  {
    auto uow = database_->Begin();
    service::JobRecord j = **(*uow)->jobs().Get(job, std::nullopt, true);
    j.state = api::JobState::kSucceeded;
    j.finished_ms = now_.load();
    ASSERT_TRUE((*uow)->jobs().Update(j).ok());
    ASSERT_TRUE((*uow)->allocations().ReleaseForJob(job).ok());
    ASSERT_TRUE((*uow)->Commit().ok());
  }
  EXPECT_EQ(s.OpenData(node_a_, job, id).status().code(), common::Code::kNotFound);
  EXPECT_TRUE(s.OpenData(member_, job, id).ok());
  EXPECT_TRUE(Upload(s, node_a_, job, 20, "the last one").ok());
  now_ += 3601 * 1000;
  EXPECT_EQ(Upload(s, node_a_, job, 30, "too late").status().code(), common::Code::kNotFound);
  EXPECT_EQ(s.List(node_a_, job).status().code(), common::Code::kNotFound);
}

TEST_F(CheckpointsPgTest, TornUploadsAreNeverListedAndStaleOnesAreSwept) {
  auto s = Service();
  const int64_t job = PlacedJob(member_, node_a_);
  auto torn = Upload(s, node_a_, job, 5, "abcdefghij", json::object(), /*commit=*/false);
  ASSERT_TRUE(torn.ok()) << torn.status().ToString();
  const int64_t id = torn->id;
  EXPECT_TRUE(ListedSteps(s, job).empty());
  EXPECT_EQ(s.OpenData(member_, job, id).status().code(), common::Code::kNotFound);
  auto entry = s.Entry(node_a_, job, id);
  ASSERT_TRUE(entry.ok());
  EXPECT_EQ(entry->state, "uploading");
  EXPECT_EQ(entry->received_bytes, 10);

  // A chunk at the wrong offset, one damaged on the way, one past the end: refused, nothing kept.
  EXPECT_EQ(s.PutChunk(node_a_, job, id, 3, common::Sha256Hex("x"), "x").status().code(),
            common::Code::kFailedPrecondition);
  auto part_dir = data_dir_ + "/checkpoints/tenant-" + std::to_string(member_.tenant_id) + "/job-" +
                  std::to_string(job);
  EXPECT_EQ(std::filesystem::file_size(part_dir + "/" + std::to_string(id) + ".part"), 10u);

  // An upload that stops halfway cannot be committed.
  auto half = s.StartUpload(
      node_a_, job, json{{"step", 6}, {"bytes", 4}, {"sha256", common::Sha256Hex("wxyz")}}.dump());
  ASSERT_TRUE(half.ok());
  const int64_t hid = half->id;
  ASSERT_TRUE(s.PutChunk(node_a_, job, hid, 0, common::Sha256Hex("wx"), "wx").ok());
  EXPECT_EQ(s.PutChunk(node_a_, job, hid, 2, common::Sha256Hex("yz"), "yZ").status().field(),
            "X-Content-Sha256");
  EXPECT_EQ(s.PutChunk(node_a_, job, hid, 2, common::Sha256Hex("yzq"), "yzq").status().code(),
            common::Code::kInvalidArgument);
  EXPECT_EQ(s.Commit(node_a_, job, hid).status().code(), common::Code::kFailedPrecondition);
  EXPECT_TRUE(ListedSteps(s, job).empty());

  // Untouched past the TTL: the next upload's start sweeps both, files included.
  now_ += 61'000;
  auto fresh = Upload(s, node_a_, job, 7, "new");
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_EQ(s.Entry(node_a_, job, id).status().code(), common::Code::kNotFound);
  EXPECT_EQ(s.Entry(node_a_, job, hid).status().code(), common::Code::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(part_dir + "/" + std::to_string(id) + ".part"));
  EXPECT_EQ(ListedSteps(s, job), (std::vector<int64_t>{7}));
}

TEST_F(CheckpointsPgTest, ShaMismatchDiscardsTheUpload) {
  auto s = Service();
  const int64_t job = PlacedJob(member_, node_a_);
  json start = {{"step", 1}, {"bytes", 3}, {"sha256", common::Sha256Hex("abc")}};
  auto e = s.StartUpload(node_a_, job, start.dump());
  ASSERT_TRUE(e.ok());
  const int64_t id = e->id;
  ASSERT_TRUE(s.PutChunk(node_a_, job, id, 0, common::Sha256Hex("abd"), "abd").ok());
  // A commit naming another digest than the declared one is refused before anything is read.
  EXPECT_EQ(s.Commit(node_a_, job, id, json{{"sha256", common::Sha256Hex("abd")}}.dump())
                .status()
                .field(),
            "sha256");
  EXPECT_TRUE(s.Entry(node_a_, job, id).ok());
  auto c = s.Commit(node_a_, job, id, json{{"sha256", common::Sha256Hex("abc")}}.dump());
  EXPECT_EQ(c.status().field(), "sha256") << c.status().ToString();
  EXPECT_EQ(s.Entry(node_a_, job, id).status().code(), common::Code::kNotFound);
  EXPECT_TRUE(ListedSteps(s, job).empty());
}

TEST_F(CheckpointsPgTest, BoundsPerCheckpointJobAndTenant) {
  service::CheckpointLimits limits;
  limits.max_bytes = 100;
  limits.max_per_job = 3;
  limits.tenant_quota_bytes = 150;
  auto s = Service(limits);
  const int64_t job = PlacedJob(member_, node_a_, R"(,"keep":10)");
  auto big = Upload(s, node_a_, job, 1, std::string(101, 'x'));
  EXPECT_EQ(big.status().field(), "bytes");
  ASSERT_TRUE(Upload(s, node_a_, job, 1, std::string(60, 'a')).ok());
  ASSERT_TRUE(Upload(s, node_a_, job, 2, std::string(60, 'b')).ok());
  auto over_quota = Upload(s, node_a_, job, 3, std::string(60, 'c'));
  EXPECT_EQ(over_quota.status().code(), common::Code::kResourceExhausted);
  ASSERT_TRUE(Upload(s, node_a_, job, 3, std::string(10, 'c')).ok());
  auto over_count = Upload(s, node_a_, job, 4, "d");
  EXPECT_EQ(over_count.status().code(), common::Code::kResourceExhausted);
  // Bad starts are refused whole.
  for (const json& bad :
       {json{{"step", -1}, {"bytes", 1}, {"sha256", std::string(64, 'a')}},
        json{{"step", 1}, {"bytes", 1}, {"sha256", "ABC"}},
        json{{"step", 1},
             {"bytes", 1},
             {"sha256", std::string(64, 'a')},
             {"metrics", {{"Loss", 1}}}},
        json{{"step", 1}, {"bytes", 1}, {"sha256", std::string(64, 'a')}, {"path", "/etc"}}}) {
    EXPECT_EQ(s.StartUpload(node_a_, job, bad.dump()).status().code(),
              common::Code::kInvalidArgument)
        << bad.dump();
  }
}

TEST_F(CheckpointsPgTest, TheTenantsStorageQuotaCountsItsDatasetsAndTheTighterLimitRefuses) {
  auto set_quota = [&](std::optional<int64_t> bytes) {
    auto uow = database_->Begin();
    ASSERT_TRUE(uow.ok());
    auto t = (*uow)->tenants().GetTenant(member_.tenant_id, true);
    ASSERT_TRUE(t.ok() && t->has_value());
    (*t)->quota.storage_bytes = bytes;
    ASSERT_TRUE((*uow)->tenants().UpdateTenant(**t, now_.load()).ok());
    ASSERT_TRUE((*uow)->Commit().ok());
  };
  service::CheckpointLimits limits;
  limits.tenant_quota_bytes = 150;  // the server-wide limit, over checkpoints only
  auto s = Service(limits);
  const int64_t job = PlacedJob(member_, node_a_, R"(,"keep":10)");
  // A dataset upload of 40 bytes in progress counts against the tenant's quota of 100.
  {
    auto uow = database_->Begin();
    ASSERT_TRUE(uow.ok());
    service::DatasetRecord d;
    d.tenant_id = member_.tenant_id;
    d.name = "held";
    d.state = service::kDatasetUploading;
    d.source = {{"format", "hdf5"}, {"upload", {{"bytes", 40}, {"sha256", std::string(64, 'a')}}}};
    ASSERT_TRUE((*uow)->datasets().Insert(d, now_.load()).ok());
    ASSERT_TRUE((*uow)->Commit().ok());
  }
  set_quota(100);
  ASSERT_TRUE(Upload(s, node_a_, job, 1, std::string(50, 'a')).ok());
  auto over = Upload(s, node_a_, job, 2, std::string(11, 'b'));
  EXPECT_EQ(over.status().code(), common::Code::kResourceExhausted);
  EXPECT_EQ(over.status().message(),
            "tenant acme holds 90 bytes of datasets, images and checkpoints; 11 more exceed its "
            "quota.storage_bytes of 100");
  // Nothing of the refused start is left: exactly the room that is left still fits.
  auto fits = Upload(s, node_a_, job, 2, std::string(10, 'b'));
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  // A larger tenant quota: the server-wide limit (150 of checkpoints) is now the tighter.
  set_quota(1000);
  auto server_wide = Upload(s, node_a_, job, 3, std::string(91, 'c'));
  EXPECT_EQ(server_wide.status().code(), common::Code::kResourceExhausted);
  EXPECT_NE(server_wide.status().message().find("150-byte quota"), std::string::npos)
      << server_wide.status().message();
  // Deleting a checkpoint frees its bytes for both.
  set_quota(100);
  ASSERT_TRUE(s.Delete(member_, job, fits->id).ok());
  EXPECT_TRUE(Upload(s, node_a_, job, 3, std::string(10, 'c')).ok());
  // Another tenant's quota is its own.
  const int64_t theirs = PlacedJob(other_, node_b_);
  EXPECT_TRUE(Upload(s, node_b_, theirs, 1, std::string(100, 'z')).ok());
}

TEST_F(CheckpointsPgTest, RetentionKeepsTheNewestAndTheBest) {
  auto s = Service();
  // keep 2, plus the lowest loss.
  const int64_t job = PlacedJob(member_, node_a_, R"(,"best":{"metric":"loss","mode":"min"})");
  const double losses[] = {0.9, 0.2, 0.5, 0.7, 0.6};
  for (int i = 0; i < 5; ++i) {
    auto up =
        Upload(s, node_a_, job, (i + 1) * 10, "ckpt" + std::to_string(i), {{"loss", losses[i]}});
    ASSERT_TRUE(up.ok()) << up.status().ToString();
  }
  EXPECT_EQ(ListedSteps(s, job), (std::vector<int64_t>{20, 40, 50}));
  // Without a metric: the newest two only.
  const int64_t plain = PlacedJob(member_, node_a_);
  for (int i = 1; i <= 4; ++i) ASSERT_TRUE(Upload(s, node_a_, plain, i, "c").ok());
  EXPECT_EQ(ListedSteps(s, plain), (std::vector<int64_t>{3, 4}));
  // The dropped files are gone from disk too.
  const std::string dir = data_dir_ + "/checkpoints/tenant-" + std::to_string(member_.tenant_id) +
                          "/job-" + std::to_string(plain);
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 2);
}

TEST_F(CheckpointsPgTest, LaunchesResumeFromTheLatestReadyUploadOrInitFrom) {
  auto s = Service();
  const int64_t job = PlacedJob(member_, node_a_);
  auto uow = database_->Begin();
  auto job_record = (*uow)->jobs().Get(job, std::nullopt, false);
  auto none = service::ResumeCheckpointFor(**uow, **job_record);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->id, 0);
  uow->reset();
  ASSERT_TRUE(Upload(s, node_a_, job, 10, "ten").ok());
  auto c20 = Upload(s, node_a_, job, 20, "twenty");
  ASSERT_TRUE(c20.ok());
  ASSERT_TRUE(Upload(s, node_a_, job, 30, "thirty", json::object(), /*commit=*/false).ok());
  uow = database_->Begin();
  auto ref = service::ResumeCheckpointFor(**uow, **job_record);
  ASSERT_TRUE(ref.ok());
  EXPECT_EQ(ref->id, c20->id);  // not the uncommitted step 30
  EXPECT_EQ(ref->step, 20);
  EXPECT_EQ(ref->sha256, common::Sha256Hex("twenty"));
  uow->reset();

  // init_from: the same tenant's checkpoint starts a new job (on node b, which may download it);
  // another tenant's is not found at submit.
  const int64_t c20_id = c20->id;
  const int64_t child = PlacedJob(member_, node_b_, "");
  (void)child;
  service::JobsService jobs(
      *database_, api::SpecLimits{}, [this] { return now_.load(); }, nullptr);
  const std::string spec = R"({"name":"from","kind":"train","resources":{"nodes":1},"init_from":)" +
                           std::to_string(c20_id) + "}";
  auto theirs = jobs.Submit(other_, spec, "");
  EXPECT_EQ(theirs.status().code(), common::Code::kNotFound);
  EXPECT_EQ(theirs.status().field(), "init_from");
  auto missing = jobs.Submit(
      member_, R"({"name":"x","kind":"train","resources":{"nodes":1},"init_from":999999})", "");
  EXPECT_EQ(missing.status().code(), common::Code::kNotFound);
  auto ours = jobs.Submit(member_, spec, "");
  ASSERT_TRUE(ours.ok()) << ours.status().ToString();
  const int64_t started = ours->job.job.id;
  EXPECT_EQ(s.OpenData(node_b_, job, c20_id).status().code(), common::Code::kNotFound);
  EXPECT_EQ(s.Entry(node_b_, job, c20_id).status().code(), common::Code::kNotFound);
  {
    auto w = database_->Begin();
    service::AllocationRecord a{started, node_b_.node_id, "", "", 1, 1, "cpu", true, false};
    ASSERT_TRUE((*w)->allocations().Insert(a).ok());
    ASSERT_TRUE((*w)->Commit().ok());
  }
  // The agent's download reads the entry first, then the bytes (HttpCheckpointStore::Get).
  EXPECT_TRUE(s.Entry(node_b_, job, c20_id).ok());
  EXPECT_TRUE(s.OpenData(node_b_, job, c20_id).ok());
  uow = database_->Begin();
  auto started_record = (*uow)->jobs().Get(started, std::nullopt, false);
  auto init = service::ResumeCheckpointFor(**uow, **started_record);
  ASSERT_TRUE(init.ok());
  EXPECT_EQ(init->id, c20_id);
  EXPECT_EQ(init->job_id, job);
}

}  // namespace
}  // namespace controlplane
