// JobsService on the in-memory twin (label unit): submit and its idempotency key, admission
// (429 for a full pending quota, 422 for what can never run), cancel, and tenant scoping (another
// tenant's job does not exist for you). Every refusal stores nothing.
#include "controlplane/service/jobs_service.h"

#include <gtest/gtest.h>

#include "controlplane/testing/memory_service_fixture.h"

namespace controlplane::service {
namespace {

using api::JobState;
using common::Code;

using JobsServiceTest = testing::TwoTenantServiceTest;

TEST_F(JobsServiceTest, SubmitStoresAPendingJobAndItsFirstEventThenWakesTheScheduler) {
  int wakes = 0;
  auto jobs = Jobs([&] { ++wakes; });
  auto r = jobs.Submit(member_, Spec("first"), "");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->created);
  EXPECT_EQ(wakes, 1);
  const JobRecord& j = r->job.job;
  EXPECT_EQ(j.state, JobState::kPending);
  EXPECT_EQ(j.tenant, "a");
  EXPECT_EQ(j.token_id, member_.token_id);
  EXPECT_EQ(j.request_sha256, "");  // no key, no digest
  EXPECT_EQ(j.created_ms, now_.load());
  auto events = EventsOf(j.id);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].data["to"], "PENDING");
  EXPECT_EQ(events[0].data["actor"], "a/" + member_.token_name);
}

TEST_F(JobsServiceTest, AnRlJobIsAcceptedAndAnRlBlockOnATrainJobIsRefused) {
  auto jobs = Jobs();
  auto r = jobs.Submit(member_, R"({"name":"ppo","kind":"rl","resources":{"nodes":1},
      "engine":{"model":{"action_dim":3},"rl":{"envs":4,"total_env_steps":1000}}})", "");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->job.job.kind, "rl");
  EXPECT_EQ(r->job.job.state, JobState::kPending);
  EXPECT_EQ(r->job.job.spec["engine"]["rl"]["envs"], 4);
  auto bad = jobs.Submit(member_, R"({"name":"bc","kind":"train","resources":{"nodes":1},
      "engine":{"rl":{"envs":4}}})", "");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(bad.status().field(), "engine.rl");
}

TEST_F(JobsServiceTest, TheSameKeyAndBodyReplayTheJobAndADifferentBodyIsAConflict) {
  auto jobs = Jobs();
  auto first = jobs.Submit(member_, Spec("x"), "key-1");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  now_ += 1000;
  auto replay = jobs.Submit(member_, Spec("x"), "key-1");
  ASSERT_TRUE(replay.ok()) << replay.status().ToString();
  EXPECT_FALSE(replay->created);
  EXPECT_EQ(replay->job.job.id, first->job.job.id);
  EXPECT_EQ(replay->job.job.created_ms, first->job.job.created_ms);
  auto changed = jobs.Submit(member_, Spec("y"), "key-1");
  EXPECT_EQ(changed.status().code(), Code::kAlreadyExists);  // 409
  EXPECT_EQ(changed.status().field(), "Idempotency-Key");
  EXPECT_EQ(CountJobs(), 1);
  // Keys are per tenant.
  auto theirs = jobs.Submit(other_, Spec("y"), "key-1");
  ASSERT_TRUE(theirs.ok());
  EXPECT_TRUE(theirs->created);
  EXPECT_EQ(jobs.Submit(member_, Spec("x"), std::string(201, 'k')).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(jobs.Submit(member_, Spec("x"), "bad\nkey").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(CountJobs(), 2);
}

TEST_F(JobsServiceTest, AFullPendingQuotaIs429AndAJobThatCanNeverRunIs422) {
  const int64_t c = AddTenant("c", Quota{std::nullopt, std::nullopt, 1, 1});
  const Principal p = AddPerson(c, "member");
  auto jobs = Jobs();
  ASSERT_TRUE(jobs.Submit(p, Spec("one"), "").ok());
  auto full = jobs.Submit(p, Spec("two"), "");
  EXPECT_EQ(full.status().code(), Code::kResourceExhausted);  // 429
  EXPECT_EQ(full.status().field(), "quota.pending_jobs");
  auto wide = jobs.Submit(p, Spec("wide", 2), "");
  EXPECT_EQ(wide.status().code(), Code::kUnprocessable);  // 422: past nodes_per_job
  EXPECT_EQ(wide.status().field(), "resources.nodes");
  // Larger than any node: never fits, whatever the quota.
  auto big = jobs.Submit(member_, Spec("big", 1, 9), "");
  EXPECT_EQ(big.status().code(), Code::kUnprocessable);
  auto two_nodes = jobs.Submit(member_, Spec("two-nodes", 2), "");
  EXPECT_EQ(two_nodes.status().code(), Code::kUnprocessable);
  const int64_t d = AddTenant("d", Quota{std::nullopt, 0, std::nullopt, std::nullopt});
  EXPECT_EQ(jobs.Submit(AddPerson(d, "member"), Spec("never"), "").status().code(),
            Code::kUnprocessable);
  EXPECT_EQ(CountJobs(), 1);
  // A bad spec is refused before anything is read or written.
  EXPECT_EQ(jobs.Submit(member_, "{\"name\": 3}", "").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(CountJobs(), 1);
}

TEST_F(JobsServiceTest, CancelEndsAPendingJobAtOnceAndAsksAPlacedOneToStop) {
  auto jobs = Jobs();
  const int64_t pending = jobs.Submit(member_, Spec("p"), "")->job.job.id;
  const int64_t placed = jobs.Submit(member_, Spec("s"), "")->job.job.id;
  {
    auto uow = Begin();
    JobRecord j = **uow->jobs().Get(placed, std::nullopt, true);
    j.state = JobState::kRunning;
    ASSERT_TRUE(uow->jobs().Update(j).ok());
    ASSERT_TRUE(uow->Commit().ok());
  }
  now_ += 10;
  auto c1 = jobs.Cancel(member_, pending);
  ASSERT_TRUE(c1.ok()) << c1.status().ToString();
  EXPECT_EQ(c1->job.state, JobState::kCancelled);
  EXPECT_EQ(c1->job.finished_ms, now_.load());
  auto c2 = jobs.Cancel(member_, placed);
  ASSERT_TRUE(c2.ok());
  EXPECT_EQ(c2->job.state, JobState::kCancelling);
  EXPECT_EQ(jobs.Cancel(member_, placed)->job.state, JobState::kCancelling);  // twice is once
  EXPECT_EQ(EventsOf(placed, "state").size(), 2u);
  EXPECT_EQ(jobs.Cancel(member_, pending).status().code(), Code::kFailedPrecondition);
  const Principal viewer = AddPerson(a_, "viewer");
  EXPECT_EQ(jobs.Cancel(viewer, placed).status().code(), Code::kPermissionDenied);
  EXPECT_TRUE(jobs.Get(viewer, placed).ok());
}

TEST_F(JobsServiceTest, AnotherTenantsJobDoesNotExistForYou) {
  auto jobs = Jobs();
  const int64_t mine = jobs.Submit(member_, Spec("mine"), "")->job.job.id;
  ASSERT_TRUE(jobs.Submit(other_, Spec("theirs"), "").ok());
  EXPECT_EQ(jobs.Get(other_, mine).status().code(), Code::kNotFound);
  EXPECT_EQ(jobs.Cancel(other_, mine).status().code(), Code::kNotFound);
  EXPECT_EQ(jobs.Events(other_, mine, 0, "", 10).status().code(), Code::kNotFound);
  EXPECT_EQ(jobs.Logs(other_, mine).status().code(), Code::kNotFound);
  EXPECT_EQ(jobs.Metrics(other_, mine, {}).status().code(), Code::kNotFound);
  EXPECT_EQ(JobRow(mine).state, JobState::kPending);
  auto theirs = jobs.List(other_, 100, "", "");
  ASSERT_TRUE(theirs.ok());
  ASSERT_EQ(theirs->jobs.size(), 1u);
  EXPECT_EQ(theirs->jobs[0].job.tenant, "b");
  // Naming another tenant narrows nothing for a member: an empty page.
  EXPECT_TRUE(jobs.List(other_, 100, "", "", a_)->jobs.empty());
  const Principal admin = AddPerson(b_, "cluster-admin");
  EXPECT_TRUE(jobs.Get(admin, mine).ok());
  EXPECT_EQ(jobs.List(admin, 100, "", "")->jobs.size(), 2u);
  auto only_a = jobs.List(admin, 100, "", "", a_);
  ASSERT_EQ(only_a->jobs.size(), 1u);
  EXPECT_EQ(only_a->jobs[0].job.id, mine);
}

TEST_F(JobsServiceTest, ListPagesWithACursorAndValidatesItsArguments) {
  auto jobs = Jobs();
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(jobs.Submit(member_, Spec("j" + std::to_string(i)), "").ok());
  auto page = jobs.List(member_, 2, "", "");
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->jobs.size(), 2u);
  ASSERT_TRUE(page->next_cursor);
  auto rest = jobs.List(member_, 2, *page->next_cursor, "");
  ASSERT_EQ(rest->jobs.size(), 1u);
  EXPECT_EQ(rest->jobs[0].job.name, "j0");
  EXPECT_FALSE(rest->next_cursor);
  EXPECT_EQ(jobs.List(member_, 2, "", "", 0, "J1")->jobs.size(), 1u);
  EXPECT_EQ(jobs.List(member_, 0, "", "").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(jobs.List(member_, 1001, "", "").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(jobs.List(member_, 10, "12x", "").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(jobs.List(member_, 10, "", "DONE").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(jobs.List(member_, 10, "", "", 0, std::string(129, 'q')).status().code(),
            Code::kInvalidArgument);
}

TEST_F(JobsServiceTest, MachinesNeitherSubmitNorRead) {
  auto jobs = Jobs();
  const Principal join = AddPerson(a_, "agent");
  EXPECT_EQ(jobs.Submit(join, Spec("x"), "").status().code(), Code::kPermissionDenied);
  EXPECT_EQ(jobs.List(join, 10, "", "").status().code(), Code::kPermissionDenied);
  EXPECT_EQ(jobs.Submit(AddPerson(a_, "viewer"), Spec("x"), "").status().code(),
            Code::kPermissionDenied);
  EXPECT_EQ(CountJobs(), 0);
}

}  // namespace
}  // namespace controlplane::service
