// Time limits on the in-memory twin (label unit): which jobs are past their limit, and what
// cancelling them writes.
#include "controlplane/service/time_limits.h"

#include <gtest/gtest.h>

#include "controlplane/testing/memory_service_fixture.h"

namespace controlplane::service {
namespace {

using api::JobState;

class TimeLimitsTest : public testing::MemoryServiceTest {
 protected:
  void SetUp() override {
    MemoryServiceTest::SetUp();
    tenant_ = AddTenant("a");
  }

  // A job in `state` with `spec`, started `age_ms` ago (when running).
  int64_t AddJob(JobState state, nlohmann::json spec, int64_t age_ms) {
    auto uow = Begin();
    NewJob nj;
    nj.tenant_id = tenant_;
    nj.name = "j";
    nj.kind = "command";
    nj.spec = std::move(spec);
    nj.now_ms = now_.load() - age_ms;
    const int64_t id = *uow->jobs().Insert(nj);
    JobRecord j = **uow->jobs().Get(id, std::nullopt, true);
    j.state = state;
    if (state == JobState::kRunning) j.started_ms = now_.load() - age_ms;
    EXPECT_TRUE(uow->jobs().Update(j).ok());
    EXPECT_TRUE(uow->Commit().ok());
    return id;
  }

  int64_t tenant_ = 0;
};

TEST_F(TimeLimitsTest, TheLimitComesFromAPositiveIntegerInTheSpec) {
  JobRecord j;
  EXPECT_EQ(TimeLimitMillis(j), 0);
  j.spec = {{"time_limit_seconds", 30}};
  EXPECT_EQ(TimeLimitMillis(j), 30'000);
  j.spec = {{"time_limit_seconds", 0}};
  EXPECT_EQ(TimeLimitMillis(j), 0);
  j.spec = {{"time_limit_seconds", -5}};
  EXPECT_EQ(TimeLimitMillis(j), 0);
  j.spec = {{"time_limit_seconds", 1.5}};
  EXPECT_EQ(TimeLimitMillis(j), 0);
  j.spec = {{"time_limit_seconds", "60"}};
  EXPECT_EQ(TimeLimitMillis(j), 0);
}

TEST_F(TimeLimitsTest, OnlyRunningJobsPastTheirLimitAreCancelled) {
  const nlohmann::json limited = {{"time_limit_seconds", 10}};
  const int64_t over = AddJob(JobState::kRunning, limited, 10'001);
  const int64_t at = AddJob(JobState::kRunning, limited, 10'000);  // not yet: strictly past
  const int64_t unlimited = AddJob(JobState::kRunning, nlohmann::json::object(), 1'000'000);
  const int64_t scheduled = AddJob(JobState::kScheduled, limited, 1'000'000);
  auto uow = Begin();
  auto n = EnforceTimeLimits(*uow, now_.load());
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 1);
  ASSERT_TRUE(uow->Commit().ok());
  const JobRecord cancelled = JobRow(over);
  EXPECT_EQ(cancelled.state, JobState::kCancelling);
  EXPECT_EQ(cancelled.reason, "time limit 10 s reached");
  EXPECT_EQ(cancelled.updated_ms, now_.load());
  auto events = EventsOf(over, "state");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].data["from"], "RUNNING");
  EXPECT_EQ(events[0].data["to"], "CANCELLING");
  EXPECT_EQ(events[0].data["actor"], "scheduler");
  EXPECT_EQ(JobRow(at).state, JobState::kRunning);
  EXPECT_EQ(JobRow(unlimited).state, JobState::kRunning);
  EXPECT_EQ(JobRow(scheduled).state, JobState::kScheduled);
  // Cancelling is not running: a second pass changes nothing.
  uow = Begin();
  EXPECT_EQ(*EnforceTimeLimits(*uow, now_.load() + 1), 1);  // `at` is now past
  EXPECT_EQ(*EnforceTimeLimits(*uow, now_.load() + 1), 0);
}

}  // namespace
}  // namespace controlplane::service
