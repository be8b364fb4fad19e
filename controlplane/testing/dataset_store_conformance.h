// The dataset store's contract (service/dataset_store.h), continued from store_conformance.h
// (whose fixture and Backend concept this suite shares) and run on PostgreSQL and the in-memory
// twin: versions counting up per (tenant, name) over every row, deleted ones included; tenant
// scoping; the newest ready version or an exact one; newest-first lists with filters and a
// cursor; updates; a training job bound to one version, and which unfinished jobs read it; the
// bytes a tenant's versions count against its storage quota.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "controlplane/service/dataset_store.h"
#include "controlplane/testing/store_conformance.h"

namespace controlplane::testing {

template <typename Backend>
class DatasetStoreConformanceTest : public StoreConformanceTest<Backend> {
 protected:
  // A new version of `name` in `tenant`, committed; its record as Insert returned it.
  service::DatasetRecord AddDataset(int64_t tenant, const std::string& name) {
    auto uow = this->Begin();
    service::DatasetRecord d;
    d.tenant_id = tenant;
    d.token_id = 7;
    d.name = name;
    d.source = {{"format", "hdf5"}, {"path", "/data/" + name + ".hdf5"}};
    auto r = uow->datasets().Insert(d, this->kNow);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(uow->Commit().ok());
    return r.ok() ? *r : service::DatasetRecord{};
  }

  void SetState(int64_t id, const std::string& state) {
    auto uow = this->Begin();
    auto d = uow->datasets().Get(id, std::nullopt, /*for_update=*/true);
    ASSERT_TRUE(d.ok() && d->has_value());
    (*d)->state = state;
    ASSERT_TRUE(uow->datasets().Update(**d, this->kNow + 1).ok());
    ASSERT_TRUE(uow->Commit().ok());
  }
};

TYPED_TEST_SUITE_P(DatasetStoreConformanceTest);

TYPED_TEST_P(DatasetStoreConformanceTest, VersionsCountUpPerTenantAndNameAndReadsAreScoped) {
  const int64_t a = this->AddTenant("a"), b = this->AddTenant("b");
  const service::DatasetRecord a1 = this->AddDataset(a, "lift");
  EXPECT_EQ(a1.version, 1);
  EXPECT_EQ(a1.state, service::kDatasetImporting);
  EXPECT_GT(a1.id, 0);
  EXPECT_EQ(this->AddDataset(a, "lift").version, 2);
  EXPECT_EQ(this->AddDataset(b, "lift").version, 1);
  EXPECT_EQ(this->AddDataset(a, "can").version, 1);
  // A deleted version keeps its number: the next one does not reuse it.
  const service::DatasetRecord a3 = this->AddDataset(a, "lift");
  this->SetState(a3.id, service::kDatasetDeleted);
  EXPECT_EQ(this->AddDataset(a, "lift").version, 4);

  auto uow = this->Begin();
  auto mine = uow->datasets().Get(a1.id, a, false);
  ASSERT_TRUE(mine.ok() && mine->has_value()) << mine.status().ToString();
  EXPECT_EQ((*mine)->tenant, "a");
  EXPECT_EQ((*mine)->token_id, 7);
  EXPECT_EQ((*mine)->name, "lift");
  EXPECT_EQ((*mine)->source["path"], "/data/lift.hdf5");
  EXPECT_TRUE((*mine)->manifest.is_null());
  EXPECT_FALSE((*mine)->job_id);
  EXPECT_EQ((*mine)->created_ms, this->kNow);
  auto theirs = uow->datasets().Get(a1.id, b, false);
  ASSERT_TRUE(theirs.ok());
  EXPECT_FALSE(theirs->has_value());
  auto any = uow->datasets().Get(a1.id, std::nullopt, false);
  ASSERT_TRUE(any.ok() && any->has_value());
  auto none = uow->datasets().Get(a1.id + 1000, std::nullopt, false);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TYPED_TEST_P(DatasetStoreConformanceTest, FindTakesTheNewestReadyVersionOrTheExactOne) {
  const int64_t a = this->AddTenant("a"), b = this->AddTenant("b");
  const service::DatasetRecord v1 = this->AddDataset(a, "lift");
  const service::DatasetRecord v2 = this->AddDataset(a, "lift");
  const service::DatasetRecord v3 = this->AddDataset(a, "lift");
  {
    auto uow = this->Begin();
    auto nothing_ready = uow->datasets().Find(a, "lift", std::nullopt);
    ASSERT_TRUE(nothing_ready.ok());
    EXPECT_FALSE(nothing_ready->has_value());
  }
  this->SetState(v1.id, service::kDatasetReady);
  this->SetState(v2.id, service::kDatasetReady);
  this->SetState(v3.id, service::kDatasetFailed);
  auto uow = this->Begin();
  auto newest = uow->datasets().Find(a, "lift", std::nullopt);
  ASSERT_TRUE(newest.ok() && newest->has_value());
  EXPECT_EQ((*newest)->id, v2.id);
  // An exact version is found whatever its state; the caller says why it cannot be used.
  auto exact = uow->datasets().Find(a, "lift", 3);
  ASSERT_TRUE(exact.ok() && exact->has_value());
  EXPECT_EQ((*exact)->state, service::kDatasetFailed);
  auto missing = uow->datasets().Find(a, "lift", 9);
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());
  auto other_tenant = uow->datasets().Find(b, "lift", std::nullopt);
  ASSERT_TRUE(other_tenant.ok());
  EXPECT_FALSE(other_tenant->has_value());
  auto other_name = uow->datasets().Find(a, "lif", std::nullopt);
  ASSERT_TRUE(other_name.ok());
  EXPECT_FALSE(other_name->has_value());
}

TYPED_TEST_P(DatasetStoreConformanceTest, ListsAreNewestFirstWithFiltersCursorAndLimit) {
  const int64_t a = this->AddTenant("a"), b = this->AddTenant("b");
  const int64_t l1 = this->AddDataset(a, "lift").id;
  const int64_t c1 = this->AddDataset(a, "can").id;
  const int64_t k1 = this->AddDataset(b, "lift").id;
  const int64_t l2 = this->AddDataset(a, "lift").id;
  this->SetState(c1, service::kDatasetDeleted);
  auto ids = [&](const service::DatasetQuery& q) {
    auto uow = this->Begin();
    auto rows = uow->datasets().List(q);
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    std::vector<int64_t> out;
    if (rows.ok()) {
      for (const auto& d : *rows) out.push_back(d.id);
    }
    return out;
  };
  service::DatasetQuery q;
  EXPECT_EQ(ids(q), (std::vector<int64_t>{l2, k1, l1}));
  q.include_deleted = true;
  EXPECT_EQ(ids(q), (std::vector<int64_t>{l2, k1, c1, l1}));
  q.tenant_id = a;
  EXPECT_EQ(ids(q), (std::vector<int64_t>{l2, c1, l1}));
  q.name = "lift";
  EXPECT_EQ(ids(q), (std::vector<int64_t>{l2, l1}));
  q.limit = 1;
  EXPECT_EQ(ids(q), (std::vector<int64_t>{l2}));
  q.before_id = l2;
  EXPECT_EQ(ids(q), (std::vector<int64_t>{l1}));
  q.before_id = l1;
  EXPECT_TRUE(ids(q).empty());
}

TYPED_TEST_P(DatasetStoreConformanceTest, UpdatesAreReadBackAndBadOnesRefused) {
  const int64_t a = this->AddTenant("a");
  const int64_t job = this->AddJob(a, "import-lift-v1");
  const service::DatasetRecord d = this->AddDataset(a, "lift");
  {
    auto uow = this->Begin();
    service::DatasetRecord u = d;
    u.state = service::kDatasetReady;
    u.manifest = {{"episodes", 3}, {"shards", {{{"file", "shard-00000.ebd"}}}}};
    u.episodes = 3;
    u.frames = 300;
    u.bytes = 1 << 20;
    u.path = "/datasets/tenant-1/dataset-1";
    u.job_id = job;
    u.error = "";
    ASSERT_TRUE(uow->datasets().Update(u, this->kNow + 5).ok());
    ASSERT_TRUE(uow->Commit().ok());
  }
  {
    auto uow = this->Begin();
    auto by_job = uow->datasets().GetByJob(job, false);
    ASSERT_TRUE(by_job.ok() && by_job->has_value()) << by_job.status().ToString();
    const service::DatasetRecord& r = **by_job;
    EXPECT_EQ(r.id, d.id);
    EXPECT_EQ(r.state, service::kDatasetReady);
    EXPECT_EQ(r.manifest["shards"][0]["file"], "shard-00000.ebd");
    EXPECT_EQ(r.episodes, 3);
    EXPECT_EQ(r.frames, 300);
    EXPECT_EQ(r.bytes, 1 << 20);
    EXPECT_EQ(r.path, "/datasets/tenant-1/dataset-1");
    EXPECT_EQ(r.updated_ms, this->kNow + 5);
    EXPECT_EQ(r.created_ms, this->kNow);
    auto no_job = uow->datasets().GetByJob(job + 1000, false);
    ASSERT_TRUE(no_job.ok());
    EXPECT_FALSE(no_job->has_value());
  }
  {
    // The table's CHECK allows five states only.
    auto uow = this->Begin();
    service::DatasetRecord u = d;
    u.state = "half-done";
    EXPECT_EQ(uow->datasets().Update(u, this->kNow).code(), common::Code::kInternal);
  }
  {
    auto uow = this->Begin();
    service::DatasetRecord u = d;
    u.state = service::kDatasetFailed;
    u.job_id = job + 1000;  // no such job
    EXPECT_EQ(uow->datasets().Update(u, this->kNow).code(), common::Code::kInternal);
  }
  {
    auto uow = this->Begin();
    service::DatasetRecord u = d;
    u.state = service::kDatasetFailed;
    u.error = "not UTF-8: \xc3\x28";
    EXPECT_EQ(uow->datasets().Update(u, this->kNow).code(), common::Code::kInvalidArgument);
  }
  {
    auto uow = this->Begin();
    service::DatasetRecord orphan;
    orphan.tenant_id = a + 1000;
    orphan.name = "x";
    EXPECT_EQ(uow->datasets().Insert(orphan, this->kNow).status().code(), common::Code::kInternal);
  }
  auto uow = this->Begin();
  auto still = uow->datasets().Get(d.id, std::nullopt, false);
  ASSERT_TRUE(still.ok() && still->has_value());
  EXPECT_EQ((*still)->state, service::kDatasetReady);  // none of the refused updates landed
}

TYPED_TEST_P(DatasetStoreConformanceTest, AJobReadsItsVersionsAndOnlyUnfinishedJobsHoldThem) {
  const int64_t a = this->AddTenant("a");
  const service::DatasetRecord d = this->AddDataset(a, "lift");
  const service::DatasetRecord other = this->AddDataset(a, "can");
  const int64_t j1 = this->AddJob(a, "train-1"), j2 = this->AddJob(a, "train-2");
  const int64_t j3 = this->AddJob(a, "train-3");
  {
    auto uow = this->Begin();
    ASSERT_TRUE(uow->datasets().BindJob(j1, d.id).ok());
    ASSERT_TRUE(uow->datasets().BindJob(j2, d.id).ok());
    ASSERT_TRUE(uow->datasets().BindJob(j3, other.id).ok());
    ASSERT_TRUE(uow->Commit().ok());
  }
  {
    auto uow = this->Begin();
    auto read = uow->datasets().ForJob(j1);
    ASSERT_TRUE(read.ok() && read->has_value()) << read.status().ToString();
    EXPECT_EQ((*read)->id, d.id);
    EXPECT_EQ((*read)->tenant, "a");
    auto unbound = uow->datasets().ForJob(j3 + 1000);
    ASSERT_TRUE(unbound.ok());
    EXPECT_FALSE(unbound->has_value());
    EXPECT_EQ(*uow->datasets().LiveJobsReading(d.id), (std::vector<int64_t>{j1, j2}));
    auto job = uow->jobs().Get(j1, std::nullopt, true);
    ASSERT_TRUE(job.ok() && job->has_value());
    (*job)->state = api::JobState::kSucceeded;
    ASSERT_TRUE(uow->jobs().Update(**job).ok());
    EXPECT_EQ(*uow->datasets().LiveJobsReading(d.id), (std::vector<int64_t>{j2}));
    EXPECT_EQ(*uow->datasets().LiveJobsReading(other.id), (std::vector<int64_t>{j3}));
    ASSERT_TRUE(uow->Commit().ok());
  }
  {
    // A command job reads several versions; each is bound once.
    auto uow = this->Begin();
    EXPECT_EQ(uow->datasets().BindJob(j1, d.id).code(), common::Code::kAlreadyExists);
  }
  {
    auto uow = this->Begin();
    ASSERT_TRUE(uow->datasets().BindJob(j2, other.id).ok());
    auto all = uow->datasets().AllForJob(j2);
    ASSERT_TRUE(all.ok()) << all.status().ToString();
    ASSERT_EQ(all->size(), 2u);
    EXPECT_EQ((*all)[0].id, std::min(d.id, other.id));
    EXPECT_EQ((*all)[1].id, std::max(d.id, other.id));
    EXPECT_EQ((*all)[0].tenant, "a");
    EXPECT_TRUE(uow->datasets().AllForJob(j3 + 1000)->empty());
    EXPECT_EQ(*uow->datasets().LiveJobsReading(other.id), (std::vector<int64_t>{j2, j3}));
    ASSERT_TRUE(uow->Commit().ok());
  }
  {
    auto uow = this->Begin();
    EXPECT_EQ(uow->datasets().BindJob(j1 + 1000, d.id).code(), common::Code::kInternal);
  }
  {
    auto uow = this->Begin();
    const int64_t j4 = *uow->jobs().Insert(this->Job(a, "train-4"));
    EXPECT_EQ(uow->datasets().BindJob(j4, d.id + 1000).code(), common::Code::kInternal);
  }
}

TYPED_TEST_P(DatasetStoreConformanceTest, UploadsAreCountedPerTenantAndSweptOldestFirst) {
  const int64_t a = this->AddTenant("a"), b = this->AddTenant("b");
  auto upload = [&](int64_t tenant, const std::string& name, int64_t now) {
    auto uow = this->Begin();
    service::DatasetRecord d;
    d.tenant_id = tenant;
    d.name = name;
    d.state = service::kDatasetUploading;
    d.source = {{"format", "hdf5"}, {"upload", {{"bytes", 10}, {"sha256", std::string(64, 'a')}}}};
    auto r = uow->datasets().Insert(d, now);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(uow->Commit().ok());
    return r.ok() ? *r : service::DatasetRecord{};
  };
  const service::DatasetRecord u1 = upload(a, "lift", this->kNow);
  EXPECT_EQ(u1.state, service::kDatasetUploading);
  EXPECT_EQ(u1.version, 1);
  const service::DatasetRecord u2 = upload(a, "can", this->kNow - 5000);
  const service::DatasetRecord u3 = upload(b, "lift", this->kNow - 1000);
  this->AddDataset(a, "path-import");  // importing: neither counted nor swept
  {
    auto uow = this->Begin();
    EXPECT_EQ(*uow->datasets().CountUploading(a), 2);
    EXPECT_EQ(*uow->datasets().CountUploading(b), 1);
    auto got = uow->datasets().Get(u1.id, a, false);
    ASSERT_TRUE(got.ok() && got->has_value());
    EXPECT_EQ((*got)->state, service::kDatasetUploading);
    EXPECT_EQ((*got)->received_bytes, 0);
    EXPECT_EQ((*got)->source["upload"]["bytes"], 10);
    // A chunk moves received_bytes and the update time, which the sweep reads.
    service::DatasetRecord u = **got;
    u.received_bytes = 6;
    ASSERT_TRUE(uow->datasets().Update(u, this->kNow + 100).ok());
    ASSERT_TRUE(uow->Commit().ok());
  }
  {
    auto uow = this->Begin();
    auto got = uow->datasets().Get(u1.id, a, false);
    ASSERT_TRUE(got.ok() && got->has_value());
    EXPECT_EQ((*got)->received_bytes, 6);
    EXPECT_EQ((*got)->updated_ms, this->kNow + 100);
    auto stale = uow->datasets().StaleUploads(this->kNow, 10);
    ASSERT_TRUE(stale.ok()) << stale.status().ToString();
    ASSERT_EQ(stale->size(), 2u);
    EXPECT_EQ((*stale)[0].id, u2.id);  // oldest first
    EXPECT_EQ((*stale)[1].id, u3.id);
    EXPECT_EQ((*stale)[1].tenant, "b");
    auto one = uow->datasets().StaleUploads(this->kNow, 1);
    ASSERT_TRUE(one.ok());
    ASSERT_EQ(one->size(), 1u);
    EXPECT_EQ((*one)[0].id, u2.id);
    service::DatasetRecord bad = **got;
    bad.received_bytes = -1;
    EXPECT_EQ(uow->datasets().Update(bad, this->kNow).code(), common::Code::kInternal);
  }
  {
    auto uow = this->Begin();
    auto got = uow->datasets().Get(u2.id, std::nullopt, true);
    ASSERT_TRUE(got.ok() && got->has_value());
    service::DatasetRecord f = **got;
    f.state = service::kDatasetFailed;
    ASSERT_TRUE(uow->datasets().Update(f, this->kNow).ok());
    ASSERT_TRUE(uow->Commit().ok());
  }
  auto uow = this->Begin();
  EXPECT_EQ(*uow->datasets().CountUploading(a), 1);
  auto stale = uow->datasets().StaleUploads(this->kNow, 10);
  ASSERT_TRUE(stale.ok());
  ASSERT_EQ(stale->size(), 1u);
  EXPECT_EQ((*stale)[0].id, u3.id);
}

TYPED_TEST_P(DatasetStoreConformanceTest, BytesForTenantSumWhatEachStateHolds) {
  const int64_t a = this->AddTenant("a"), b = this->AddTenant("b");
  auto add = [&](int64_t tenant, const std::string& name, const std::string& state,
                 std::optional<int64_t> declared, int64_t bytes) {
    auto uow = this->Begin();
    service::DatasetRecord d;
    d.tenant_id = tenant;
    d.name = name;
    d.state = declared ? service::kDatasetUploading : service::kDatasetImporting;
    d.source = {{"format", name == "image" ? "oci" : "hdf5"}};
    if (declared) {
      d.source["upload"] = {{"bytes", *declared}, {"sha256", std::string(64, 'a')}};
    } else {
      d.source["path"] = "/data/" + name;
    }
    auto r = uow->datasets().Insert(d, this->kNow);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return int64_t{0};
    r->state = state;
    r->bytes = bytes;
    EXPECT_TRUE(uow->datasets().Update(*r, this->kNow).ok());
    EXPECT_TRUE(uow->Commit().ok());
    return r->id;
  };
  auto bytes = [&](int64_t tenant, int64_t except) {
    auto uow = this->Begin();
    auto n = uow->datasets().BytesForTenant(tenant, except);
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    return n.ok() ? *n : -1;
  };
  EXPECT_EQ(bytes(a, 0), 0);
  // Uploading: the declared size, whatever has arrived.
  const int64_t up = add(a, "up", service::kDatasetUploading, int64_t{3} << 32, 0);
  EXPECT_EQ(bytes(a, 0), int64_t{3} << 32);
  // Importing a path: nothing until its manifest reports bytes, then those.
  const int64_t path = add(a, "path", service::kDatasetImporting, std::nullopt, 0);
  EXPECT_EQ(bytes(a, 0), int64_t{3} << 32);
  // Importing an upload: the greater of its declared size and its manifest's bytes.
  add(a, "small", service::kDatasetImporting, 100, 40);
  add(a, "grown", service::kDatasetImporting, 100, 700);
  // Ready (an OCI image as any other format): its bytes, the upload's size no longer.
  add(a, "image", service::kDatasetReady, 5000, 2000);
  const int64_t ready = add(a, "ready", service::kDatasetReady, std::nullopt, 9);
  // Failed: what its import wrote (and reported) until the version is deleted; deleted: nothing.
  add(a, "failed", service::kDatasetFailed, 50, 50);
  add(a, "failed-early", service::kDatasetFailed, 50, 0);
  add(a, "deleted", service::kDatasetDeleted, std::nullopt, 60);
  // Another tenant's versions count for it alone.
  add(b, "other", service::kDatasetReady, std::nullopt, 1);
  const int64_t expect = (int64_t{3} << 32) + 100 + 700 + 2000 + 9 + 50;
  EXPECT_EQ(bytes(a, 0), expect);
  EXPECT_EQ(bytes(b, 0), 1);
  EXPECT_EQ(bytes(a, up), expect - (int64_t{3} << 32));
  EXPECT_EQ(bytes(a, ready), expect - 9);
  EXPECT_EQ(bytes(a, path), expect);
  EXPECT_EQ(bytes(b + 1000, 0), 0);
}

REGISTER_TYPED_TEST_SUITE_P(DatasetStoreConformanceTest,
                            BytesForTenantSumWhatEachStateHolds,
                            UploadsAreCountedPerTenantAndSweptOldestFirst,
                            VersionsCountUpPerTenantAndNameAndReadsAreScoped,
                            FindTakesTheNewestReadyVersionOrTheExactOne,
                            ListsAreNewestFirstWithFiltersCursorAndLimit,
                            UpdatesAreReadBackAndBadOnesRefused,
                            AJobReadsItsVersionsAndOnlyUnfinishedJobsHoldThem);

}  // namespace controlplane::testing
