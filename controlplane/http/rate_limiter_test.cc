#include "controlplane/http/rate_limiter.h"

#include <gtest/gtest.h>

namespace controlplane::http {
namespace {

TEST(RateLimiterTest, BurstThenRate) {
  RateLimiter r(/*rate=*/10, /*burst=*/3);
  EXPECT_EQ(r.Take(1, 100.0), 0);
  EXPECT_EQ(r.Take(1, 100.0), 0);
  EXPECT_EQ(r.Take(1, 100.0), 0);
  const double wait = r.Take(1, 100.0);
  EXPECT_NEAR(wait, 0.1, 1e-9);
  // Another token has its own bucket.
  EXPECT_EQ(r.Take(2, 100.0), 0);
  // A tenth of a second later one request is back, and only one.
  EXPECT_EQ(r.Take(1, 100.1 + 1e-9), 0);
  EXPECT_GT(r.Take(1, 100.1 + 1e-9), 0);
  // Refill never exceeds the burst.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(r.Take(1, 200.0), 0);
  EXPECT_GT(r.Take(1, 200.0), 0);
}

TEST(RateLimiterTest, DisabledAllowsEverything) {
  RateLimiter r(0, 0);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(r.Take(1, 0), 0);
}

}  // namespace
}  // namespace controlplane::http
