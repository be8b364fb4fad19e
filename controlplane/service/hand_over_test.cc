// The hand-over clock (hand_over.h): a sample per job started on nodes freed while it waited,
// from the last of their ends; starts that were no hand-over are not counted.
#include "controlplane/service/hand_over.h"

#include <gtest/gtest.h>

namespace controlplane::service {
namespace {

TEST(HandOverClockTest, FromTheLastEndOfTheNodesAJobWaitedFor) {
  HandOverClock c(/*window=*/8, /*min_samples=*/2, /*max_gap_ms=*/10'000);
  c.Freed({1, 2}, 1000);
  c.Freed({3}, 1500);
  c.Started({1, 2, 3}, /*submit_ms=*/100, /*at_ms=*/2700);  // 1.2 s after node 3's end
  EXPECT_EQ(c.samples(), 1u);
  EXPECT_FALSE(c.MeanMs().has_value());  // fewer than min_samples
  c.Freed({1}, 5000);
  c.Started({1}, 4000, 5800);
  ASSERT_TRUE(c.MeanMs().has_value());
  EXPECT_EQ(*c.MeanMs(), (1200 + 800) / 2);
}

TEST(HandOverClockTest, StartsThatWereNoHandOverAreNotCounted) {
  HandOverClock c(8, 1, 10'000);
  c.Started({1}, 0, 1000);  // nothing ended there
  c.Freed({2}, 1000);
  c.Started({2}, /*submit_ms=*/3000, 3500);  // submitted after the node was free
  c.Freed({3}, 1000);
  c.Started({3}, 0, 20'000);  // idle longer than max_gap_ms
  EXPECT_EQ(c.samples(), 0u);
  c.Started({2}, 0, 4000);  // node 2's end was used up by the start above
  EXPECT_EQ(c.samples(), 0u);
  c.Freed({4}, 1000);
  c.Started({4}, 0, 1300);
  EXPECT_EQ(c.samples(), 1u);
  EXPECT_EQ(c.MeanMs(), 300);
}

TEST(HandOverClockTest, OnlyTheLastWindowCounts) {
  HandOverClock c(2, 1, 10'000);
  for (int64_t gap : {5000, 100, 300}) {
    c.Freed({1}, 1000);
    c.Started({1}, 0, 1000 + gap);
  }
  EXPECT_EQ(c.MeanMs(), 200);
}

}  // namespace
}  // namespace controlplane::service
