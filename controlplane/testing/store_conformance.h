// The stores' contract (service/store.h) as typed gtest suites, run against every
// implementation: PostgreSQL (db/stores_pg_test.cc, label pg) and the in-memory twin
// (testing/memory_database_test.cc, label unit). Where the two must behave the same, a case
// here says how: orderings, tenant scoping, codes, idempotency keys, units of work, locks,
// cursors and limits. This file holds the fixture and the contracts of units of work, jobs,
// allocations, nodes and events; tenant_store_conformance.h those of tenants, tokens, the audit
// log and fair share.
//
// A Backend provides: static SetUpSuite() and TearDownSuite() (once per binary: may use gtest
// assertions), Open(prefix) (a fresh, empty database for one test), and database(). gtest wants
// a type-parameterised suite in a header so that several binaries instantiate it; each includes
// these files once and instantiates both suites with INSTANTIATE_TYPED_TEST_SUITE_P.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "controlplane/service/fair_share_store.h"
#include "controlplane/service/store.h"

namespace controlplane::testing {

template <typename Backend>
class StoreConformanceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { Backend::SetUpSuite(); }
  static void TearDownTestSuite() { Backend::TearDownSuite(); }
  void SetUp() override { backend_.Open("conformance"); }

  service::Database& db() { return backend_.database(); }

  std::unique_ptr<service::UnitOfWork> Begin() {
    auto uow = db().Begin();
    EXPECT_TRUE(uow.ok()) << uow.status().ToString();
    return uow.ok() ? std::move(uow.value()) : nullptr;
  }

  int64_t AddTenant(const std::string& name) {
    auto uow = Begin();
    service::TenantRecord t;
    t.name = name;
    auto id = uow->tenants().CreateTenant(t, kNow);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    EXPECT_TRUE(uow->Commit().ok());
    return id.ok() ? *id : 0;
  }

  int64_t AddNode(const std::string& name, int cpu = 4) {
    auto uow = Begin();
    api::RegisterRequest r{
        name, "10.0.0." + std::to_string(name.size()), "http://" + name, cpu, 1 << 20, {}, {}};
    auto id = uow->nodes().Upsert(r, kNow);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    EXPECT_TRUE(uow->Commit().ok());
    return id.ok() ? *id : 0;
  }

  static service::NewJob Job(int64_t tenant, const std::string& name, const std::string& key = "") {
    service::NewJob j;
    j.tenant_id = tenant;
    j.name = name;
    j.kind = "command";
    j.priority = 50;
    j.spec = {{"name", name}, {"command", {"true"}}, {"resources", {{"nodes", 1}}}};
    j.idempotency_key = key;
    j.request_sha256 = key.empty() ? "" : "digest-of-" + name;
    j.now_ms = kNow;
    return j;
  }

  int64_t AddJob(int64_t tenant, const std::string& name, const std::string& key = "") {
    auto uow = Begin();
    auto id = uow->jobs().Insert(Job(tenant, name, key));
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    EXPECT_TRUE(uow->Commit().ok());
    return id.ok() ? *id : 0;
  }

  static constexpr int64_t kNow = 1'700'000'000'000;
  Backend backend_;
};

TYPED_TEST_SUITE_P(StoreConformanceTest);

TYPED_TEST_P(StoreConformanceTest, AUnitOfWorkIsAllOrNothing) {
  {
    auto uow = this->Begin();
    service::TenantRecord t;
    t.name = "dropped";
    ASSERT_TRUE(uow->tenants().CreateTenant(t, this->kNow).ok());
  }  // destroyed without Commit
  const int64_t a = this->AddTenant("a");
  {
    // A failed statement fails the unit: what it wrote before is lost, later calls fail too.
    auto uow = this->Begin();
    ASSERT_TRUE(uow->jobs().Insert(this->Job(a, "lost")).ok());
    service::TenantRecord dup;
    dup.name = "a";
    auto taken = uow->tenants().CreateTenant(dup, this->kNow);
    EXPECT_EQ(taken.status().code(), common::Code::kAlreadyExists);
    EXPECT_EQ(taken.status().field(), "name");
    EXPECT_FALSE(uow->tenants().CountTenants().ok());
    (void)uow->Commit();
  }
  auto uow = this->Begin();
  EXPECT_EQ(*uow->tenants().CountTenants(), 1);
  service::JobQuery all;
  EXPECT_TRUE(uow->jobs().List(all)->empty());
}

TYPED_TEST_P(StoreConformanceTest, IdsAreNeverReusedAfterARollback) {
  int64_t first = 0;
  {
    auto uow = this->Begin();
    service::TenantRecord t;
    t.name = "x";
    first = *uow->tenants().CreateTenant(t, this->kNow);
  }
  EXPECT_GT(this->AddTenant("x"), first);
}

TYPED_TEST_P(StoreConformanceTest, ARowReadForUpdateWaitsForItsHolder) {
  const int64_t a = this->AddTenant("a");
  const int64_t id = this->AddJob(a, "locked");
  auto holder = this->Begin();
  auto held = holder->jobs().Get(id, std::nullopt, /*for_update=*/true);
  ASSERT_TRUE(held.ok() && held->has_value());
  std::atomic<bool> done{false};
  std::string seen;
  std::thread other([&] {
    auto uow = this->db().Begin();
    ASSERT_TRUE(uow.ok());
    auto job = (*uow)->jobs().Get(id, std::nullopt, true);
    ASSERT_TRUE(job.ok() && job->has_value());
    seen = (*job)->reason;
    (*job)->reason = "second";
    ASSERT_TRUE((*uow)->jobs().Update(**job).ok());
    ASSERT_TRUE((*uow)->Commit().ok());
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(done.load()) << "the second unit did not wait for the lock";
  (*held)->reason = "first";
  ASSERT_TRUE(holder->jobs().Update(**held).ok());
  ASSERT_TRUE(holder->Commit().ok());
  other.join();
  EXPECT_EQ(seen, "first");  // it read the row as the holder committed it
  auto uow = this->Begin();
  EXPECT_EQ((*uow->jobs().Get(id, std::nullopt, false))->reason, "second");
}

TYPED_TEST_P(StoreConformanceTest, JobsRoundTripAndAreScopedByTenant) {
  const int64_t a = this->AddTenant("a"), b = this->AddTenant("b");
  const int64_t id = this->AddJob(a, "first");
  auto uow = this->Begin();
  auto job = uow->jobs().Get(id, a, false);
  ASSERT_TRUE(job.ok() && job->has_value());
  const service::JobRecord& j = **job;
  EXPECT_EQ(j.tenant_id, a);
  EXPECT_EQ(j.tenant, "a");
  EXPECT_EQ(j.name, "first");
  EXPECT_EQ(j.kind, "command");
  EXPECT_EQ(j.state, api::JobState::kPending);
  EXPECT_EQ(j.reason, "");
  EXPECT_EQ(j.priority, 50);
  EXPECT_EQ(j.spec, this->Job(a, "first").spec);
  EXPECT_EQ(j.attempt, 0);
  EXPECT_EQ(j.token_id, 0);
  EXPECT_EQ(j.request_sha256, "");
  EXPECT_FALSE(j.exit_code || j.started_ms || j.finished_ms);
  EXPECT_EQ(j.created_ms, this->kNow);
  EXPECT_EQ(j.updated_ms, this->kNow);
  EXPECT_FALSE(uow->jobs().Get(id, b, false)->has_value());  // another tenant's: not there
  EXPECT_TRUE(uow->jobs().Get(id, std::nullopt, false)->has_value());
  EXPECT_FALSE(uow->jobs().Get(id + 1000, std::nullopt, false)->has_value());

  service::JobRecord changed = j;
  changed.state = api::JobState::kFailed;
  changed.reason = "exited with code 3";
  changed.attempt = 2;
  changed.exit_code = 3;
  changed.updated_ms = this->kNow + 5;
  changed.started_ms = this->kNow + 1;
  changed.finished_ms = this->kNow + 5;
  changed.name = "not written";  // Update writes the mutable columns only
  ASSERT_TRUE(uow->jobs().Update(changed).ok());
  auto after = **uow->jobs().Get(id, std::nullopt, false);
  EXPECT_EQ(after.state, api::JobState::kFailed);
  EXPECT_EQ(after.reason, "exited with code 3");
  EXPECT_EQ(after.attempt, 2);
  EXPECT_EQ(after.exit_code, 3);
  EXPECT_EQ(after.started_ms, this->kNow + 1);
  EXPECT_EQ(after.finished_ms, this->kNow + 5);
  EXPECT_EQ(after.updated_ms, this->kNow + 5);
  EXPECT_EQ(after.name, "first");
}

TYPED_TEST_P(StoreConformanceTest, AnIdempotencyKeyIsUniquePerTenant) {
  const int64_t a = this->AddTenant("a"), b = this->AddTenant("b");
  const int64_t first = this->AddJob(a, "one", "key-1");
  auto uow = this->Begin();
  // Refused without failing the unit: it goes on and commits.
  auto again = uow->jobs().Insert(this->Job(a, "two", "key-1"));
  EXPECT_EQ(again.status().code(), common::Code::kAlreadyExists);
  auto other = uow->jobs().Insert(this->Job(b, "three", "key-1"));
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  ASSERT_TRUE(uow->jobs().Insert(this->Job(a, "no key")).ok());
  ASSERT_TRUE(uow->jobs().Insert(this->Job(a, "no key either")).ok());
  ASSERT_TRUE(uow->Commit().ok());
  uow = this->Begin();
  auto found = uow->jobs().GetByIdempotencyKey(a, "key-1");
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ((*found)->id, first);
  EXPECT_EQ((*found)->request_sha256, "digest-of-one");
  EXPECT_EQ((**uow->jobs().GetByIdempotencyKey(b, "key-1")).id, *other);
  EXPECT_FALSE(uow->jobs().GetByIdempotencyKey(a, "key-2")->has_value());
  EXPECT_FALSE(uow->jobs().GetByIdempotencyKey(a, "")->has_value());
}

// The submission batcher's forms: many jobs, events and audit rows in one call each, with ids
// in the order given, read back as the one-row forms write them.
TYPED_TEST_P(StoreConformanceTest, BatchInsertsKeepTheirOrderAndReadBackAsOneByOne) {
  const int64_t a = this->AddTenant("a"), b = this->AddTenant("b");
  this->AddJob(a, "before", "taken");
  auto uow = this->Begin();
  auto ids = uow->jobs().InsertMany(
      {this->Job(a, "one"), this->Job(b, "two", "k"), this->Job(a, "three", "k")});
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  ASSERT_EQ(ids->size(), 3u);
  EXPECT_LT((*ids)[0], (*ids)[1]);
  EXPECT_LT((*ids)[1], (*ids)[2]);
  std::vector<service::EventRecord> events;
  for (int64_t id : *ids) {
    events.push_back({0, id, this->kNow + 1, "state", {{"to", "PENDING"}, {"job", id}}});
  }
  ASSERT_TRUE(uow->events().AppendMany(events).ok());
  service::AuditRecord row;
  row.time_ms = this->kNow;
  row.actor = "someone \"quoted\" \\ é";
  row.role = "member";
  row.tenant_id = a;
  row.method = "POST";
  row.route = "/v1/jobs";
  row.path = "/v1/jobs";
  row.status = 201;
  row.outcome = "ok";
  std::vector<service::AuditRecord> rows;
  for (int64_t id : *ids) {
    row.target = "job " + std::to_string(id);
    row.request_id = "batch";  // not unique: ids are not found through it
    rows.push_back(row);
  }
  auto row_ids = uow->audit().AppendMany(rows);
  ASSERT_TRUE(row_ids.ok()) << row_ids.status().ToString();
  ASSERT_EQ(row_ids->size(), 3u);
  EXPECT_LT((*row_ids)[0], (*row_ids)[1]);
  EXPECT_LT((*row_ids)[1], (*row_ids)[2]);
  ASSERT_TRUE(uow->Commit().ok());

  uow = this->Begin();
  const std::vector<std::string> names = {"one", "two", "three"};
  for (size_t i = 0; i < 3; ++i) {
    auto j = uow->jobs().Get((*ids)[i], std::nullopt, false);
    ASSERT_TRUE(j.ok() && j->has_value());
    EXPECT_EQ((*j)->name, names[i]);
    EXPECT_EQ((*j)->state, api::JobState::kPending);
    EXPECT_EQ((*j)->created_ms, this->kNow);
    EXPECT_EQ((*j)->spec["name"], names[i]);
    auto ev = uow->events().List((*ids)[i], 0, "state", 10);
    ASSERT_TRUE(ev.ok());
    ASSERT_EQ(ev->size(), 1u);
    EXPECT_EQ((*ev)[0].data["job"], (*ids)[i]);
    EXPECT_EQ((*ev)[0].time_ms, this->kNow + 1);
  }
  EXPECT_EQ((**uow->jobs().GetByIdempotencyKey(b, "k")).id, (*ids)[1]);
  EXPECT_EQ((**uow->jobs().GetByIdempotencyKey(a, "k")).request_sha256, "digest-of-three");
  EXPECT_EQ(*uow->jobs().PendingCount(a), 3);
  EXPECT_EQ(*uow->jobs().PendingCount(b), 1);
  service::AuditQuery q;
  auto audit = uow->audit().List(q);
  ASSERT_TRUE(audit.ok());
  ASSERT_EQ(audit->size(), 3u);
  for (const service::AuditRecord& r : *audit) {
    const size_t i = std::find(row_ids->begin(), row_ids->end(), r.id) - row_ids->begin();
    ASSERT_LT(i, 3u);
    EXPECT_EQ(r.target, "job " + std::to_string((*ids)[i]));
    EXPECT_EQ(r.actor, row.actor);
    EXPECT_EQ(r.status, 201);
    EXPECT_EQ(r.tenant_id, a);
  }
  uow.reset();

  // A key already taken: already_exists (the unit is then abandoned).
  uow = this->Begin();
  auto clash = uow->jobs().InsertMany({this->Job(a, "x"), this->Job(a, "y", "taken")});
  EXPECT_EQ(clash.status().code(), common::Code::kAlreadyExists);
  EXPECT_TRUE(uow->jobs().InsertMany({})->empty());
}

TYPED_TEST_P(StoreConformanceTest, JobListsAreNewestFirstWithCursorsFiltersAndLimits) {
  const int64_t a = this->AddTenant("a"), b = this->AddTenant("b");
  std::vector<int64_t> ids;
  for (const char* name : {"Train-1", "eval-1", "train-2", "other"}) {
    ids.push_back(this->AddJob(a, name));
  }
  const int64_t theirs = this->AddJob(b, "train-b");
  auto uow = this->Begin();
  service::JobRecord done = **uow->jobs().Get(ids[1], std::nullopt, false);
  done.state = api::JobState::kSucceeded;
  ASSERT_TRUE(uow->jobs().Update(done).ok());
  auto ids_of = [](const std::vector<service::JobRecord>& v) {
    std::vector<int64_t> out;
    for (const auto& j : v) out.push_back(j.id);
    return out;
  };
  service::JobQuery q;
  q.tenant_id = a;
  q.limit = 2;
  EXPECT_EQ(ids_of(*uow->jobs().List(q)), (std::vector<int64_t>{ids[3], ids[2]}));
  q.before_id = ids[2];
  EXPECT_EQ(ids_of(*uow->jobs().List(q)), (std::vector<int64_t>{ids[1], ids[0]}));
  q.before_id = ids[0];
  EXPECT_TRUE(uow->jobs().List(q)->empty());
  q = {};
  q.name_contains = "TRAIN";  // case-insensitive, every tenant
  EXPECT_EQ(ids_of(*uow->jobs().List(q)), (std::vector<int64_t>{theirs, ids[2], ids[0]}));
  q = {};
  q.tenant_id = a;
  q.state = api::JobState::kSucceeded;
  EXPECT_EQ(ids_of(*uow->jobs().List(q)), (std::vector<int64_t>{ids[1]}));
  q = {};
  q.limit = 0;
  EXPECT_TRUE(uow->jobs().List(q)->empty());

  EXPECT_EQ(ids_of(*uow->jobs().ListInStates({api::JobState::kPending}, true)),
            (std::vector<int64_t>{ids[0], ids[2], ids[3], theirs}));  // oldest first
  EXPECT_TRUE(uow->jobs().ListInStates({api::JobState::kRunning}, false)->empty());
  EXPECT_EQ(*uow->jobs().CountForTenant(a, {api::JobState::kPending}), 3);
  EXPECT_EQ(*uow->jobs().CountForTenant(a, {api::JobState::kPending, api::JobState::kSucceeded}),
            4);
  auto counts = *uow->jobs().CountByStateAndTenant();
  EXPECT_EQ(counts, (std::map<std::pair<std::string, std::string>, int64_t>{
                        {{"PENDING", "a"}, 3}, {{"SUCCEEDED", "a"}, 1}, {{"PENDING", "b"}, 1}}));
}

// What the scheduler loop keeps between cycles rests on this (scheduler_loop.h): a pending row's
// version changes with every write and with nothing else, and waiting reasons are written only
// on rows still PENDING.
TYPED_TEST_P(StoreConformanceTest, PendingVersionsChangeWithEveryWriteOnly) {
  const int64_t a = this->AddTenant("a");
  const int64_t j1 = this->AddJob(a, "one"), j2 = this->AddJob(a, "two"),
                j3 = this->AddJob(a, "three");
  auto versions = [&] {
    auto uow = this->Begin();
    auto listed = uow->jobs().PendingVersions();
    EXPECT_TRUE(listed.ok()) << listed.status().ToString();
    std::map<int64_t, int64_t> out;
    std::vector<int64_t> order;
    for (const service::JobVersion& v : *listed) {
      out[v.id] = v.version;
      order.push_back(v.id);
    }
    EXPECT_TRUE(std::is_sorted(order.begin(), order.end()));
    return out;
  };
  const auto before = versions();
  ASSERT_EQ(before.size(), 3u);
  EXPECT_EQ(before.count(j1) + before.count(j2) + before.count(j3), 3u);
  {
    // Reads return the same version, and a lock does not change it.
    auto uow = this->Begin();
    auto got = uow->jobs().GetMany({j1, j2, j3}, true);
    ASSERT_TRUE(got.ok());
    ASSERT_EQ(got->size(), 3u);
    for (const service::JobRecord& j : *got) EXPECT_EQ(j.version, before.at(j.id)) << j.id;
    ASSERT_TRUE(uow->Commit().ok());
  }
  EXPECT_EQ(versions(), before);
  {
    // j2 ends; j1 and j2 are given reasons: only j1, still PENDING, is written.
    auto uow = this->Begin();
    service::JobRecord done = **uow->jobs().Get(j2, std::nullopt, true);
    done.state = api::JobState::kCancelled;
    ASSERT_TRUE(uow->jobs().Update(done).ok());
    auto written = uow->jobs().SetWaitingReasons({{j1, "waits for 2 cpu slots"}, {j2, "no"}}, 77);
    ASSERT_TRUE(written.ok()) << written.status().ToString();
    ASSERT_EQ(written->size(), 1u);
    EXPECT_EQ((*written)[0].id, j1);
    ASSERT_TRUE(uow->Commit().ok());
    const auto after = versions();
    EXPECT_EQ(after.count(j2), 0u);  // no longer PENDING
    EXPECT_NE(after.at(j1), before.at(j1));
    EXPECT_EQ(after.at(j1), (*written)[0].version);
    EXPECT_EQ(after.at(j3), before.at(j3));
  }
  auto uow = this->Begin();
  const service::JobRecord one = **uow->jobs().Get(j1, std::nullopt, false);
  EXPECT_EQ(one.reason, "waits for 2 cpu slots");
  EXPECT_EQ(one.updated_ms, 77);
  EXPECT_EQ(one.state, api::JobState::kPending);
  const service::JobRecord two = **uow->jobs().Get(j2, std::nullopt, false);
  EXPECT_EQ(two.state, api::JobState::kCancelled);
  EXPECT_NE(two.reason, "no");
  EXPECT_TRUE(uow->jobs().SetWaitingReasons({}, 78)->empty());
}

TYPED_TEST_P(StoreConformanceTest, AllocationsAreHeadFirstReleasedThenDeleted) {
  const int64_t a = this->AddTenant("a");
  const int64_t n1 = this->AddNode("n1"), n2 = this->AddNode("n2");
  const int64_t job = this->AddJob(a, "gang"), other = this->AddJob(a, "single");
  auto uow = this->Begin();
  auto& allocs = uow->allocations();
  ASSERT_TRUE(allocs.Insert({job, n1, "", "", 1, 2, "cpu", false, false, 0, "tok"}).ok());
  ASSERT_TRUE(allocs.Insert({job, n2, "", "", 1, 2, "cpu", true, false, 0, "tok"}).ok());
  ASSERT_TRUE(allocs.Insert({other, n1, "", "", 1, 1, "cpu", true, false}).ok());
  auto gang = *allocs.ForJob(job);
  ASSERT_EQ(gang.size(), 2u);
  EXPECT_EQ(gang[0].node_id, n2);  // the head first
  EXPECT_TRUE(gang[0].is_head);
  EXPECT_EQ(gang[0].node_name, "n2");
  EXPECT_EQ(gang[0].node_address, "10.0.0.2");
  EXPECT_EQ(gang[0].slots, 2);
  EXPECT_EQ(gang[0].node_agent_url, "http://n2");
  EXPECT_EQ(gang[0].job_token, "tok");
  EXPECT_EQ(gang[1].node_id, n1);
  EXPECT_EQ(gang[1].job_token, "tok");
  auto on_n1 = *allocs.ForNode(n1);
  ASSERT_EQ(on_n1.size(), 2u);
  EXPECT_EQ(on_n1[0].job_id, job);
  EXPECT_EQ(on_n1[1].job_id, other);
  EXPECT_EQ(allocs.All()->size(), 3u);
  auto usage = *uow->tenants().UsageNow(a);
  EXPECT_EQ(usage.slots_in_use, 5);
  EXPECT_EQ(usage.running_jobs, 0);
  EXPECT_EQ(usage.pending_jobs, 2);

  ASSERT_TRUE(allocs.MarkLaunched(job, n2).ok());
  EXPECT_TRUE((*allocs.ForJob(job))[0].launched);
  EXPECT_FALSE((*allocs.ForJob(job))[1].launched);
  EXPECT_EQ((*allocs.ForJob(job))[0].launch_sends, 0);
  ASSERT_TRUE(allocs.CountLaunchSent(job, n2).ok());
  ASSERT_TRUE(allocs.CountLaunchSent(job, n2).ok());
  EXPECT_EQ((*allocs.ForJob(job))[0].launch_sends, 2);
  EXPECT_EQ((*allocs.ForJob(job))[1].launch_sends, 0);
  ASSERT_TRUE(allocs.ReleaseForJob(job).ok());
  EXPECT_TRUE(allocs.ForJob(job)->empty());            // no slots held
  EXPECT_EQ(allocs.PlacementForJob(job)->size(), 2u);  // where it ran is kept
  EXPECT_EQ((*allocs.PlacementForJob(job))[0].job_token, "");  // its credential is not
  // A page's placements at once: each job's once, head first, whatever the ids repeat; a job
  // without a placement (or unknown) has none.
  auto page = *allocs.PlacementForJobs({other, job, other + 1000, job});
  ASSERT_EQ(page.size(), 2u);
  ASSERT_EQ(page[job].size(), 2u);
  EXPECT_EQ(page[job][0].node_id, n2);
  EXPECT_EQ(page[job][0].node_name, "n2");
  EXPECT_EQ(page[job][1].node_id, n1);
  ASSERT_EQ(page[other].size(), 1u);
  EXPECT_EQ(page[other][0].node_id, n1);
  EXPECT_EQ(allocs.ForNode(n1)->size(), 1u);
  EXPECT_EQ(allocs.All()->size(), 1u);
  EXPECT_EQ(uow->tenants().UsageNow(a)->slots_in_use, 1);
  ASSERT_TRUE(allocs.DeleteForJob(job).ok());
  EXPECT_TRUE(allocs.PlacementForJob(job)->empty());
  ASSERT_TRUE(uow->Commit().ok());

  uow = this->Begin();
  auto dup = uow->allocations().Insert({other, n1, "", "", 1, 1, "cpu", false, false});
  EXPECT_EQ(dup.code(), common::Code::kAlreadyExists);
}

TYPED_TEST_P(StoreConformanceTest, NodesUpsertByNameKeepingIdAndDraining) {
  const int64_t id = this->AddNode("n1", 4);
  auto uow = this->Begin();
  ASSERT_TRUE(uow->nodes().SetDraining(id, true).ok());
  ASSERT_TRUE(uow->nodes().SetState(id, "DOWN").ok());
  api::RegisterRequest again{"n1", "10.9.9.9", "http://elsewhere", 8, 42, {{0, "gpu", 7}}, {}};
  again.isolation.cgroup = "v2";
  auto same = uow->nodes().Upsert(again, this->kNow + 10);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(*same, id);
  auto n = **uow->nodes().GetByName("n1");
  EXPECT_EQ(n.id, id);
  EXPECT_EQ(n.address, "10.9.9.9");
  EXPECT_EQ(n.agent_url, "http://elsewhere");
  EXPECT_EQ(n.cpu_slots, 8);
  EXPECT_EQ(n.memory_bytes, 42);
  ASSERT_EQ(n.gpus.size(), 1u);
  EXPECT_EQ(n.gpus[0]["name"], "gpu");
  EXPECT_EQ(n.isolation["cgroup"], "v2");
  EXPECT_EQ(n.state, "UP");
  EXPECT_TRUE(n.draining);
  EXPECT_EQ(n.last_heartbeat_ms, this->kNow + 10);
  ASSERT_TRUE(uow->nodes().Touch(id, this->kNow + 20).ok());
  EXPECT_EQ((**uow->nodes().Get(id)).last_heartbeat_ms, this->kNow + 20);
  auto other = uow->nodes().Upsert({"n0", "10.0.0.1", "", 1, 0, {}, {}}, this->kNow);
  ASSERT_TRUE(other.ok());
  EXPECT_GT(*other, id);
  auto list = *uow->nodes().List();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].name, "n1");  // by id, not by name
  EXPECT_FALSE(list[1].draining);
  EXPECT_FALSE(uow->nodes().Get(id + 1000)->has_value());
  EXPECT_FALSE(uow->nodes().GetByName("nope")->has_value());
}

TYPED_TEST_P(StoreConformanceTest, EventsCheckpointsAndLogsOfAJob) {
  const int64_t a = this->AddTenant("a");
  const int64_t job = this->AddJob(a, "j"), other = this->AddJob(a, "k");
  auto uow = this->Begin();
  auto& ev = uow->events();
  const int64_t e1 = *ev.Append(job, this->kNow, "state", {{"to", "PENDING"}});
  ASSERT_TRUE(ev.Append(other, this->kNow, "state", {{"to", "PENDING"}}).ok());
  const int64_t e2 = *ev.Append(job, this->kNow + 1, "note", {{"text", "bad \xff byte"}});
  const int64_t e3 = *ev.Append(job, this->kNow + 2, "state", {{"to", "RUNNING"}});
  EXPECT_LT(e1, e2);
  auto all = *ev.List(job, 0, "", 100);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[1].data["text"], "bad \xef\xbf\xbd byte");  // made valid UTF-8
  EXPECT_EQ(all[2].time_ms, this->kNow + 2);
  EXPECT_EQ(all[2].job_id, job);
  EXPECT_EQ(ev.List(job, e1, "", 100)->size(), 2u);
  EXPECT_EQ(ev.List(job, 0, "", 1)->at(0).id, e1);
  auto states = *ev.List(job, 0, "state", 100);
  ASSERT_EQ(states.size(), 2u);
  EXPECT_EQ(states[1].id, e3);
  EXPECT_EQ((**ev.Latest(job, "state")).data["to"], "RUNNING");
  EXPECT_FALSE(ev.Latest(job, "step")->has_value());

  EXPECT_FALSE(ev.LatestCheckpoint(job)->has_value());
  ASSERT_TRUE(ev.AddCheckpoint(job, {20, "/c/20", 1}, this->kNow).ok());
  ASSERT_TRUE(ev.AddCheckpoint(job, {10, "/c/10", 1}, this->kNow).ok());
  ASSERT_TRUE(ev.AddCheckpoint(job, {20, "/c/20-again", 2}, this->kNow).ok());
  auto ckpt = **ev.LatestCheckpoint(job);
  EXPECT_EQ(ckpt.path, "/c/20-again");  // highest step, then newest
  EXPECT_EQ(ckpt.bytes, 2);
  EXPECT_FALSE(ev.LatestCheckpoint(other)->has_value());

  ASSERT_TRUE(uow->logs().Upsert(job, {1, "/l/1", 5}).ok());
  ASSERT_TRUE(uow->logs().Upsert(job, {-1, "/l/launcher", 3}).ok());
  ASSERT_TRUE(uow->logs().Upsert(job, {1, "/l/1", 9}).ok());
  auto logs = *uow->logs().ForJob(job);
  ASSERT_EQ(logs.size(), 2u);
  EXPECT_EQ(logs[0].rank, -1);  // by rank
  EXPECT_EQ(logs[1].bytes, 9);
  EXPECT_TRUE(uow->logs().ForJob(other)->empty());
}

TYPED_TEST_P(StoreConformanceTest, EvaluationsArePerTaskAndALaterOneReplaces) {
  const int64_t a = this->AddTenant("a");
  const int64_t job = this->AddJob(a, "ev"), other = this->AddJob(a, "k");
  auto uow = this->Begin();
  auto& ev = uow->events();
  EXPECT_TRUE(ev.Evaluations(job)->empty());
  service::EvaluationRecord r;
  r.task = "reach";
  r.episodes = 20;
  r.successes = 7;
  r.success_rate = 0.35;
  r.mean_return = 0.1 + 0.2;  // not a short decimal: read back bit for bit
  r.mean_length = 41.25;
  r.checkpoint_step = 600;
  r.policy = "bc";
  r.fp8 = true;
  r.time_ms = this->kNow;
  ASSERT_TRUE(ev.PutEvaluation(job, r).ok());
  service::EvaluationRecord push = r;
  push.task = "push";
  push.successes = 0;
  push.success_rate = 0.0;
  ASSERT_TRUE(ev.PutEvaluation(job, push).ok());
  r.successes = 8;  // the job ran again: the same task replaces its row
  r.success_rate = 0.4;
  ASSERT_TRUE(ev.PutEvaluation(job, r).ok());
  auto rows = *ev.Evaluations(job);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].task, "push");  // by task
  EXPECT_EQ(rows[1].task, "reach");
  EXPECT_EQ(rows[1].successes, 8);
  EXPECT_EQ(rows[1].success_rate, 0.4);
  EXPECT_EQ(rows[1].mean_return, 0.1 + 0.2);
  EXPECT_EQ(rows[1].mean_length, 41.25);
  EXPECT_EQ(rows[1].checkpoint_step, 600);
  EXPECT_EQ(rows[1].policy, "bc");
  EXPECT_TRUE(rows[1].fp8);
  EXPECT_EQ(rows[1].time_ms, this->kNow);
  EXPECT_TRUE(ev.Evaluations(other)->empty());
}

TYPED_TEST_P(StoreConformanceTest, StepsAreBucketedByStepWithTheLatestRowWinning) {
  const int64_t a = this->AddTenant("a");
  const int64_t job = this->AddJob(a, "steps");
  auto uow = this->Begin();
  auto& ev = uow->events();
  for (int s = 0; s < 10; ++s) {
    ASSERT_TRUE(ev.AppendStep(job, this->kNow + s, s, {{"step", s}, {"loss", 1.0}}, false).ok());
  }
  // A restarted attempt writes step 9 again: the newer row answers for it.
  ASSERT_TRUE(ev.AppendStep(job, this->kNow + 20, 9, {{"step", 9}, {"loss", 0.5}}, false).ok());
  auto steps_of = [](const std::vector<service::StepSample>& v) {
    std::vector<int64_t> out;
    for (const auto& s : v) out.push_back(s.step);
    return out;
  };
  service::StepQuery q;
  q.max_points = 3;  // buckets [0,4) [4,7) [7,10)
  auto sampled = *ev.SampleSteps(job, q);
  EXPECT_EQ(steps_of(sampled), (std::vector<int64_t>{3, 6, 9}));
  EXPECT_EQ(sampled.back().data["loss"], 0.5);
  EXPECT_EQ(sampled.back().time_ms, this->kNow + 20);
  q.max_points = 500;
  EXPECT_EQ(ev.SampleSteps(job, q)->size(), 10u);
  q.since_step = 8;
  EXPECT_EQ(steps_of(*ev.SampleSteps(job, q)), (std::vector<int64_t>{8, 9}));
  q.since_step = INT64_MIN;
  q.since_ms = this->kNow + 5;
  EXPECT_EQ(steps_of(*ev.SampleSteps(job, q)), (std::vector<int64_t>{5, 6, 7, 8, 9}));
  q.since_ms = 0;
  q.max_points = 0;
  EXPECT_TRUE(ev.SampleSteps(job, q)->empty());

  // A provisional step stands for the latest until dropped.
  q.max_points = 500;
  ASSERT_TRUE(ev.AppendStep(job, this->kNow + 30, 1001, {{"step", 1001}}, true).ok());
  EXPECT_EQ((**ev.Latest(job, "step")).data["step"], 1001);
  EXPECT_EQ(ev.SampleSteps(job, q)->back().step, 1001);
  ASSERT_TRUE(ev.DropProvisionalSteps(job).ok());
  EXPECT_EQ(ev.SampleSteps(job, q)->back().step, 9);
  EXPECT_EQ(ev.SampleSteps(job + 1000, q)->size(), 0u);
}

// The pending count a submission checks its quota against (kept in a table on PostgreSQL):
// inserts, every way out of PENDING and back, nothing of a rolled-back unit of work, and a unit
// of work sees its own changes.
TYPED_TEST_P(StoreConformanceTest, PendingCountFollowsEveryChange) {
  const int64_t a = this->AddTenant("a"), b = this->AddTenant("b");
  const int64_t j1 = this->AddJob(a, "j1"), j2 = this->AddJob(a, "j2");
  this->AddJob(a, "j3");
  this->AddJob(b, "k1");
  auto count = [&](service::UnitOfWork& uow, int64_t tenant) {
    auto n = uow.jobs().PendingCount(tenant);
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    return n.ok() ? *n : -1;
  };
  auto set_state = [&](service::UnitOfWork& uow, int64_t id, api::JobState s) {
    auto job = uow.jobs().Get(id, std::nullopt, true);
    ASSERT_TRUE(job.ok() && job->has_value());
    (*job)->state = s;
    ASSERT_TRUE(uow.jobs().Update(**job).ok());
  };
  {
    auto uow = this->Begin();
    EXPECT_EQ(count(*uow, a), 3);
    set_state(*uow, j1, api::JobState::kScheduled);
    ASSERT_TRUE(uow->jobs().Insert(this->Job(b, "k2")).ok());
    EXPECT_EQ(count(*uow, a), 2);
    EXPECT_EQ(count(*uow, b), 2);
    // Not committed: rolled back.
  }
  {
    auto uow = this->Begin();
    EXPECT_EQ(count(*uow, a), 3);
    EXPECT_EQ(count(*uow, b), 1);
    set_state(*uow, j1, api::JobState::kScheduled);
    set_state(*uow, j2, api::JobState::kCancelled);
    ASSERT_TRUE(uow->Commit().ok());
  }
  {
    auto uow = this->Begin();
    EXPECT_EQ(count(*uow, a), 1);
    set_state(*uow, j1, api::JobState::kPending);  // requeued
    ASSERT_TRUE(uow->Commit().ok());
  }
  auto uow = this->Begin();
  EXPECT_EQ(count(*uow, a), 2);
  EXPECT_EQ(count(*uow, a), *uow->jobs().CountForTenant(a, {api::JobState::kPending}));
  EXPECT_EQ(count(*uow, b + 1000), 0);
}

// GET /v1/jobs?state=S pages as JobsService::List reads them (the cursor is the last id of the
// page before): every job in that state exactly once, newest first, and nothing else, for one
// tenant and for all.
TYPED_TEST_P(StoreConformanceTest, StateFilteredPagesHoldEveryMatchingJobOnce) {
  const int64_t a = this->AddTenant("a"), b = this->AddTenant("b");
  const api::JobState kMix[] = {api::JobState::kSucceeded, api::JobState::kPending,
                                api::JobState::kSucceeded, api::JobState::kFailed,
                                api::JobState::kRunning};
  struct Made {
    int64_t id, tenant;
    api::JobState state;
  };
  std::vector<Made> made;
  {
    auto uow = this->Begin();
    for (int i = 0; i < 37; ++i) {
      const int64_t tenant = i % 3 == 0 ? b : a;
      auto id = uow->jobs().Insert(this->Job(tenant, "j" + std::to_string(i)));
      ASSERT_TRUE(id.ok()) << id.status().ToString();
      service::JobRecord j = **uow->jobs().Get(*id, std::nullopt, false);
      j.state = kMix[i % 5];
      ASSERT_TRUE(uow->jobs().Update(j).ok());
      made.push_back({*id, tenant, j.state});
    }
    ASSERT_TRUE(uow->Commit().ok());
  }
  for (const api::JobState state : {api::JobState::kSucceeded, api::JobState::kPending}) {
    for (const std::optional<int64_t> tenant : {std::optional<int64_t>(), std::optional(a)}) {
      std::vector<int64_t> want;
      for (auto m = made.rbegin(); m != made.rend(); ++m) {
        if (m->state == state && (!tenant || m->tenant == *tenant)) want.push_back(m->id);
      }
      ASSERT_GE(want.size(), 4u);  // more than one page of 3
      std::vector<int64_t> seen;
      service::JobQuery q;
      q.tenant_id = tenant;
      q.state = state;
      q.limit = 3;
      auto uow = this->Begin();
      for (int pages = 0; pages < 20; ++pages) {
        auto page = uow->jobs().List(q);
        ASSERT_TRUE(page.ok()) << page.status().ToString();
        for (const service::JobRecord& j : *page) {
          EXPECT_EQ(j.state, state) << j.id;
          seen.push_back(j.id);
        }
        if (page->size() < 3) break;
        q.before_id = page->back().id;
      }
      EXPECT_EQ(seen, want) << api::JobStateName(state) << (tenant ? " of one tenant" : "");
    }
  }
}

// Nodes counted by size, whatever their state, in (cpu slots, gpus) order.
TYPED_TEST_P(StoreConformanceTest, NodeShapesCountEveryNodeBySize) {
  this->AddNode("n1", 8);
  this->AddNode("n2", 4);
  const int64_t n3 = this->AddNode("n3", 8);
  auto uow = this->Begin();
  ASSERT_TRUE(uow->nodes().SetState(n3, "DOWN").ok());
  ASSERT_TRUE(uow->nodes().SetDraining(n3, true).ok());
  auto shapes = uow->nodes().Shapes();
  ASSERT_TRUE(shapes.ok()) << shapes.status().ToString();
  ASSERT_EQ(shapes->size(), 2u);
  EXPECT_EQ((*shapes)[0].cpu_slots, 4);
  EXPECT_EQ((*shapes)[0].gpus, 0);
  EXPECT_EQ((*shapes)[0].count, 1);
  EXPECT_EQ((*shapes)[1].cpu_slots, 8);
  EXPECT_EQ((*shapes)[1].count, 2);
}

REGISTER_TYPED_TEST_SUITE_P(
    StoreConformanceTest, AUnitOfWorkIsAllOrNothing, IdsAreNeverReusedAfterARollback,
    ARowReadForUpdateWaitsForItsHolder, JobsRoundTripAndAreScopedByTenant,
    AnIdempotencyKeyIsUniquePerTenant, BatchInsertsKeepTheirOrderAndReadBackAsOneByOne,
    JobListsAreNewestFirstWithCursorsFiltersAndLimits, PendingVersionsChangeWithEveryWriteOnly,
    AllocationsAreHeadFirstReleasedThenDeleted, NodesUpsertByNameKeepingIdAndDraining,
    EventsCheckpointsAndLogsOfAJob, EvaluationsArePerTaskAndALaterOneReplaces,
    StepsAreBucketedByStepWithTheLatestRowWinning, PendingCountFollowsEveryChange,
    NodeShapesCountEveryNodeBySize, StateFilteredPagesHoldEveryMatchingJobOnce);

}  // namespace controlplane::testing
