// The pipeline store's contract (service/pipeline_store.h), continued from store_conformance.h
// (whose fixture and Backend concept this suite shares) and run on PostgreSQL and the in-memory
// twin: rows read back as written (the steps' JSON included), tenant scoping, newest-first lists
// with a cursor and limit, the active set, and refusals of rows PostgreSQL would refuse.
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "controlplane/service/pipeline_store.h"
#include "controlplane/testing/store_conformance.h"

namespace controlplane::testing {

template <typename Backend>
class PipelineStoreConformanceTest : public StoreConformanceTest<Backend> {
 protected:
  int64_t AddToken(int64_t tenant, const std::string& hash) {
    auto uow = this->Begin();
    service::NewToken t{hash, tenant, "member", "owner-" + hash, std::nullopt, 0, 0, this->kNow};
    auto id = uow->tenants().CreateToken(t);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    EXPECT_TRUE(uow->Commit().ok());
    return id.ok() ? *id : 0;
  }

  static service::PipelineRecord Pipeline(int64_t tenant, int64_t token, const std::string& name) {
    service::PipelineRecord p;
    p.tenant_id = tenant;
    p.token_id = token;
    p.name = name;
    p.spec = {{"name", name}, {"steps", {{{"name", "a"}}}}};
    service::PipelineStepState a;
    a.name = "a";
    p.steps = {a};
    p.key = "k-" + name;
    p.created_ms = StoreConformanceTest<Backend>::kNow;
    return p;
  }

  int64_t AddPipeline(int64_t tenant, int64_t token, const std::string& name) {
    auto uow = this->Begin();
    auto id = uow->pipelines().Insert(Pipeline(tenant, token, name));
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    EXPECT_TRUE(uow->Commit().ok());
    return id.ok() ? *id : 0;
  }
};

TYPED_TEST_SUITE_P(PipelineStoreConformanceTest);

TYPED_TEST_P(PipelineStoreConformanceTest, RowsReadBackAsWrittenAndScopedToTheirTenant) {
  const int64_t a = this->AddTenant("a"), b = this->AddTenant("b");
  const int64_t tok = this->AddToken(a, "aa11");
  const int64_t id = this->AddPipeline(a, tok, "recipe");
  ASSERT_GT(id, 0);

  auto uow = this->Begin();
  auto got = uow->pipelines().Get(id, a, /*for_update=*/true);
  ASSERT_TRUE(got.ok() && got->has_value()) << got.status().ToString();
  const service::PipelineRecord& p = **got;
  EXPECT_EQ(p.tenant, "a");
  EXPECT_EQ(p.token_id, tok);
  EXPECT_EQ(p.name, "recipe");
  EXPECT_EQ(p.state, service::kPipelineRunning);
  EXPECT_EQ(p.key, "k-recipe");
  EXPECT_EQ(p.spec["steps"][0]["name"], "a");
  EXPECT_EQ(p.created_ms, this->kNow);
  EXPECT_EQ(p.updated_ms, this->kNow);
  EXPECT_FALSE(p.finished_ms);
  ASSERT_EQ(p.steps.size(), 1u);
  EXPECT_EQ(p.steps[0].state, service::kStepPending);
  // Another tenant's pipeline is not there for it; no scope finds it.
  EXPECT_FALSE(uow->pipelines().Get(id, b, false)->has_value());
  EXPECT_TRUE(uow->pipelines().Get(id, std::nullopt, false)->has_value());
  EXPECT_FALSE(uow->pipelines().Get(id + 100, std::nullopt, false)->has_value());

  // An update writes state, reason, steps and the finished time.
  service::PipelineRecord changed = p;
  changed.state = service::kPipelineFailed;
  changed.reason = "step a failed";
  changed.steps[0].state = service::kStepGateFailed;
  changed.steps[0].jobs = {7, 9};
  changed.steps[0].dataset_id = 3;
  changed.steps[0].submitting = {{"name", "x"}, {"kind", "eval"}};
  changed.steps[0].gate = {{"value", 0.5}, {"threshold", 0.6}, {"passed", false}};
  changed.steps[0].started_ms = this->kNow + 1;
  changed.steps[0].finished_ms = this->kNow + 2;
  changed.finished_ms = this->kNow + 3;
  ASSERT_TRUE(uow->pipelines().Update(changed, this->kNow + 4).ok());
  ASSERT_TRUE(uow->Commit().ok());

  uow = this->Begin();
  const service::PipelineRecord q = **uow->pipelines().Get(id, a, false);
  EXPECT_EQ(q.state, service::kPipelineFailed);
  EXPECT_EQ(q.reason, "step a failed");
  EXPECT_EQ(q.updated_ms, this->kNow + 4);
  EXPECT_EQ(q.finished_ms, this->kNow + 3);
  ASSERT_EQ(q.steps.size(), 1u);
  EXPECT_EQ(q.steps[0].state, service::kStepGateFailed);
  EXPECT_EQ(q.steps[0].jobs, (std::vector<int64_t>{7, 9}));
  EXPECT_EQ(q.steps[0].dataset_id, 3);
  EXPECT_EQ(q.steps[0].submitting["kind"], "eval");
  EXPECT_EQ(q.steps[0].gate["threshold"], 0.6);
  EXPECT_EQ(q.steps[0].started_ms, this->kNow + 1);
  EXPECT_EQ(q.steps[0].finished_ms, this->kNow + 2);
  // Found by any of its steps' jobs, in its own tenant only.
  for (int64_t job : {7, 9}) {
    auto by_job = uow->pipelines().GetByJob(a, job);
    ASSERT_TRUE(by_job.ok() && by_job->has_value()) << job;
    EXPECT_EQ((*by_job)->id, id);
    EXPECT_EQ((*by_job)->tenant, "a");
  }
  EXPECT_FALSE(uow->pipelines().GetByJob(a, 8)->has_value());
  EXPECT_FALSE(uow->pipelines().GetByJob(b, 7)->has_value());
}

TYPED_TEST_P(PipelineStoreConformanceTest, ListsAreNewestFirstAndTheActiveSetOldestFirst) {
  const int64_t a = this->AddTenant("a"), b = this->AddTenant("b");
  const int64_t ta = this->AddToken(a, "aa11"), tb = this->AddToken(b, "bb22");
  const int64_t p1 = this->AddPipeline(a, ta, "one");
  const int64_t p2 = this->AddPipeline(b, tb, "two");
  const int64_t p3 = this->AddPipeline(a, ta, "three");
  const int64_t p4 = this->AddPipeline(a, ta, "four");

  auto uow = this->Begin();
  service::PipelineQuery q;
  q.tenant_id = a;
  auto mine = *uow->pipelines().List(q);
  ASSERT_EQ(mine.size(), 3u);
  EXPECT_EQ(mine[0].id, p4);
  EXPECT_EQ(mine[1].id, p3);
  EXPECT_EQ(mine[2].id, p1);
  q.before_id = p4;
  q.limit = 1;
  mine = *uow->pipelines().List(q);
  ASSERT_EQ(mine.size(), 1u);
  EXPECT_EQ(mine[0].id, p3);
  EXPECT_EQ(uow->pipelines().List(service::PipelineQuery{})->size(), 4u);

  // Running and cancelling pipelines are active; finished ones are not.
  service::PipelineRecord r = **uow->pipelines().Get(p3, a, true);
  r.state = service::kPipelineSucceeded;
  r.finished_ms = this->kNow;
  ASSERT_TRUE(uow->pipelines().Update(r, this->kNow).ok());
  r = **uow->pipelines().Get(p1, a, true);
  r.state = service::kPipelineCancelling;
  ASSERT_TRUE(uow->pipelines().Update(r, this->kNow).ok());
  EXPECT_EQ(*uow->pipelines().Active(10), (std::vector<int64_t>{p1, p2, p4}));
  EXPECT_EQ(*uow->pipelines().Active(2), (std::vector<int64_t>{p1, p2}));
  ASSERT_TRUE(uow->Commit().ok());
}

TYPED_TEST_P(PipelineStoreConformanceTest, BadRowsAreRefused) {
  const int64_t a = this->AddTenant("a");
  const int64_t ta = this->AddToken(a, "aa11");
  {
    // A token that does not exist: the foreign key refuses it.
    auto uow = this->Begin();
    EXPECT_FALSE(uow->pipelines().Insert(this->Pipeline(a, ta + 1000, "x")).ok());
  }
  {
    // Text PostgreSQL cannot hold.
    auto uow = this->Begin();
    auto p = this->Pipeline(a, ta, "x");
    p.spec["bad"] = std::string("a\0b", 3);
    auto r = uow->pipelines().Insert(p);
    EXPECT_FALSE(r.ok());
  }
  {
    // A state outside the set.
    const int64_t id = this->AddPipeline(a, ta, "y");
    auto uow = this->Begin();
    auto p = **uow->pipelines().Get(id, a, true);
    p.state = "exploded";
    EXPECT_FALSE(uow->pipelines().Update(p, this->kNow).ok());
  }
}

REGISTER_TYPED_TEST_SUITE_P(PipelineStoreConformanceTest,
                            RowsReadBackAsWrittenAndScopedToTheirTenant,
                            ListsAreNewestFirstAndTheActiveSetOldestFirst, BadRowsAreRefused);

}  // namespace controlplane::testing
