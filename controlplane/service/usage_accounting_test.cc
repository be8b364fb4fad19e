#include "controlplane/service/usage_accounting.h"

#include <gtest/gtest.h>

namespace controlplane::service {
namespace {

constexpr int64_t kMidnight = 1'700'006'400'000;  // 2023-11-15T00:00:00Z

TEST(UsageAccountingTest, UtcDay) {
  EXPECT_EQ(UtcDay(0), "1970-01-01");
  EXPECT_EQ(UtcDay(-1), "1969-12-31");
  EXPECT_EQ(UtcDay(kMidnight - 1), "2023-11-14");
  EXPECT_EQ(UtcDay(kMidnight), "2023-11-15");
  EXPECT_EQ(UtcDay(1'709'164'800'000), "2024-02-29");
  EXPECT_EQ(UtcDay(4'102'444'800'000), "2100-01-01");
}

TEST(UsageAccountingTest, HoldingsCountJobsThatMayHoldProcesses) {
  std::vector<JobRecord> jobs(5);
  const api::JobState states[] = {api::JobState::kRunning, api::JobState::kRestarting,
                                  api::JobState::kPending, api::JobState::kSucceeded,
                                  api::JobState::kCancelling};
  for (int i = 0; i < 5; ++i) {
    jobs[i].id = i + 1;
    jobs[i].tenant_id = 10 + i;
    jobs[i].token_id = 100 + i;
    jobs[i].state = states[i];
  }
  std::vector<AllocationRecord> allocs;
  for (int64_t job = 1; job <= 5; ++job) {
    allocs.push_back({job, 1, "", "", 1, 2, "cpu", true, true});
    allocs.push_back({job, 2, "", "", 1, 2, "cpu", false, true});
  }
  auto held = HoldingsOf(jobs, allocs);
  ASSERT_EQ(held.size(), 3u);
  EXPECT_EQ(held[0].tenant_id, 10);
  EXPECT_EQ(held[0].token_id, 100);
  EXPECT_EQ(held[0].slots, 4);
  EXPECT_EQ(held[1].tenant_id, 11);
  EXPECT_EQ(held[2].tenant_id, 14);
  auto by_tenant = HeldByTenant(held);
  EXPECT_EQ(by_tenant[10][kCpuSlots], 4);
  EXPECT_EQ(by_tenant[11][kCpuSlots], 4);
}

TEST(UsageAccountingTest, DailyUsageSplitsAtMidnight) {
  std::vector<Holding> held{{1, 7, kCpuSlots, 2}, {1, 7, kGpuSlots, 1}, {2, 0, kCpuSlots, 0}};
  auto rows = DailyUsageOver(held, kMidnight - 60'000, kMidnight + 90'000);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0], (DailyUsage{1, 7, "2023-11-14", "cpu", 120}));
  EXPECT_EQ(rows[1], (DailyUsage{1, 7, "2023-11-14", "gpu", 60}));
  EXPECT_EQ(rows[2], (DailyUsage{1, 7, "2023-11-15", "cpu", 180}));
  EXPECT_EQ(rows[3], (DailyUsage{1, 7, "2023-11-15", "gpu", 90}));
}

TEST(UsageAccountingTest, AccrueStartsTheClockThenAdvancesByPeriod) {
  std::vector<Holding> held{{1, 7, kCpuSlots, 4}};
  FairShareState s;
  Accrual first = Accrue(s, held, kMidnight, 3600, 5000, 60'000);
  EXPECT_TRUE(first.due);
  EXPECT_EQ(first.state.accrued_ms, kMidnight);
  EXPECT_TRUE(first.daily.empty());
  EXPECT_TRUE(first.state.usage.empty());

  EXPECT_FALSE(Accrue(first.state, held, kMidnight + 4999, 3600, 5000, 60'000).due);
  EXPECT_FALSE(Accrue(first.state, held, kMidnight - 10'000, 3600, 5000, 60'000).due);

  Accrual next = Accrue(first.state, held, kMidnight + 10'000, 3600, 5000, 60'000);
  EXPECT_TRUE(next.due);
  EXPECT_EQ(next.state.accrued_ms, kMidnight + 10'000);
  EXPECT_NEAR(next.state.usage[1][kCpuSlots], 40, 0.1);  // 4 slots for 10 s, barely decayed
  ASSERT_EQ(next.daily.size(), 1u);
  EXPECT_EQ(next.daily[0], (DailyUsage{1, 7, "2023-11-15", "cpu", 40}));
}

TEST(UsageAccountingTest, AfterALongGapOnlyTheLastPartCounts) {
  FairShareState s;
  s.accrued_ms = kMidnight;
  s.usage[1] = {7200, 0};
  std::vector<Holding> held{{1, 7, kCpuSlots, 1}};
  Accrual a = Accrue(s, held, kMidnight + 3'600'000, 3600, 5000, 60'000);
  ASSERT_EQ(a.daily.size(), 1u);
  EXPECT_DOUBLE_EQ(a.daily[0].slot_seconds, 60);
  // The old history halved over the hour; the last minute added about 60.
  EXPECT_NEAR(a.state.usage[1][kCpuSlots], 3600 + 60, 1.0);
}

}  // namespace
}  // namespace controlplane::service
