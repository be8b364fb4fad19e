#include "controlplane/service/slot_timeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

namespace controlplane::service {
namespace {

constexpr int64_t kNow = 1000;
constexpr int64_t kForever = SlotTimeline::kForever;

TEST(SlotTimelineTest, TakingNowIsBoundedByTheFuture) {
  SlotTimeline t(4);
  t.Step(2000, -3);  // a reservation holds 3 from t=2000
  EXPECT_EQ(t.min_future(), 1);
  EXPECT_TRUE(t.CanTake(1, kForever));
  EXPECT_FALSE(t.CanTake(2, kForever));
  EXPECT_TRUE(t.CanTake(4, 2000));  // gives them back when the reservation starts
  EXPECT_FALSE(t.CanTake(4, 2001));
  EXPECT_FALSE(t.CanTake(5, 1500));
  t.Take(4, 2000);
  EXPECT_EQ(t.free_now(), 0);
  EXPECT_EQ(t.min_future(), 0);
  EXPECT_EQ(t.MinFreeBefore(kForever), 0);
}

TEST(SlotTimelineTest, ReadyTimeIsWhenTheRoomStaysForGood) {
  SlotTimeline t(1);
  EXPECT_EQ(t.ReadyTime(1, kNow), kNow);
  EXPECT_EQ(t.ReadyTime(2, kNow), kForever);
  t.Step(2000, 2);  // a job ends: 3 free
  t.Step(3000, -2);  // a reservation starts: 1 free
  t.Step(4000, 3);  // another job ends: 4 free
  EXPECT_EQ(t.ReadyTime(1, kNow), kNow);
  EXPECT_EQ(t.ReadyTime(2, kNow), 4000);  // 3 free at 2000 is not for good
  EXPECT_EQ(t.ReadyTime(4, kNow), 4000);
  EXPECT_EQ(t.ReadyTime(5, kNow), kForever);
}

TEST(SlotTimelineTest, StepsUndoAndMerge) {
  SlotTimeline t(2);
  t.Step(2000, 1);
  t.Step(2000, -3);
  EXPECT_EQ(t.min_future(), 0);
  t.Step(2000, 2);  // nets to zero: the step disappears
  EXPECT_EQ(t.min_future(), 2);
  EXPECT_EQ(t.ReadyTime(2, kNow), kNow);
  t.Take(2, kForever);
  EXPECT_EQ(t.min_future(), 0);
  EXPECT_EQ(t.ReadyTime(1, kNow), kForever);
}

// Many steps on one lane (past the ones kept inside the object), against the curve summed
// step by step from a plain map.
TEST(SlotTimelineTest, ManyStepsMatchAPlainCurve) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 200; ++round) {
    const int free_now = std::uniform_int_distribution<int>(0, 8)(rng);
    SlotTimeline t(free_now);
    std::map<int64_t, int> steps;
    const int ops = std::uniform_int_distribution<int>(1, 12)(rng);
    for (int i = 0; i < ops; ++i) {
      const int64_t at = kNow + 1000 * std::uniform_int_distribution<int>(1, 8)(rng);
      const int delta = std::uniform_int_distribution<int>(-3, 3)(rng);
      t.Step(at, delta);
      if ((steps[at] += delta) == 0) steps.erase(at);
    }
    auto min_before = [&](int64_t end) {
      int level = free_now, lowest = free_now;
      for (const auto& [at, delta] : steps) {
        if (at >= end) break;
        level += delta;
        lowest = std::min(lowest, level);
      }
      return lowest;
    };
    EXPECT_EQ(t.min_future(), min_before(kForever));
    for (int64_t end = kNow; end <= kNow + 9000; end += 500) {
      EXPECT_EQ(t.MinFreeBefore(end), min_before(end)) << "round " << round << " end " << end;
    }
    for (int slots = 0; slots <= 10; ++slots) {
      // The first of now and the step times from which the curve stays at or above `slots`.
      auto level_at = [&](int64_t when) {
        int level = free_now;
        for (const auto& [at, delta] : steps) {
          if (at <= when) level += delta;
        }
        return level;
      };
      int64_t ready = kForever;
      std::vector<int64_t> times{kNow};
      for (const auto& [at, delta] : steps) times.push_back(at);
      for (int64_t from : times) {
        bool good = level_at(from) >= slots;
        for (const auto& [at, delta] : steps) {
          if (at > from && level_at(at) < slots) good = false;
        }
        if (good) {
          ready = from;
          break;
        }
      }
      EXPECT_EQ(t.ReadyTime(slots, kNow), ready) << "round " << round << " slots " << slots;
    }
  }
}

}  // namespace
}  // namespace controlplane::service
