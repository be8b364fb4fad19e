// The run-time history (run_time_history.h): the mean ratio over a sliding window, nothing until
// enough samples, and what it refuses to learn from.
#include "controlplane/service/run_time_history.h"

#include <gtest/gtest.h>

namespace controlplane::service {
namespace {

TEST(RunTimeHistoryTest, NothingUntilEnoughJobsThenTheMeanShareOfTheLimit) {
  RunTimeHistory h(/*window=*/8, /*min_samples=*/3);
  EXPECT_FALSE(h.Ratio().has_value());
  h.Add(30, 100);
  h.Add(50, 100);
  EXPECT_FALSE(h.Ratio().has_value());
  h.Add(10, 10);
  ASSERT_TRUE(h.Ratio().has_value());
  EXPECT_DOUBLE_EQ(*h.Ratio(), (0.3 + 0.5 + 1.0) / 3);
}

TEST(RunTimeHistoryTest, OnlyTheLastWindowCounts) {
  RunTimeHistory h(/*window=*/4, /*min_samples=*/1);
  for (int i = 0; i < 10; ++i) h.Add(90, 100);
  for (int i = 0; i < 4; ++i) h.Add(20, 100);
  EXPECT_NEAR(*h.Ratio(), 0.2, 1e-12);
}

TEST(RunTimeHistoryTest, RunsPastTheLimitCountAsOneAndNonsenseIsIgnored) {
  RunTimeHistory h(/*window=*/8, /*min_samples=*/1);
  h.Add(0, 100);  // no run time
  h.Add(10, 0);   // no limit
  h.Add(-1, 100);
  EXPECT_FALSE(h.Ratio().has_value());
  h.Add(130, 100);  // ended past its limit: the scheduler's lag, not a longer job
  EXPECT_DOUBLE_EQ(*h.Ratio(), 1.0);
}

}  // namespace
}  // namespace controlplane::service
