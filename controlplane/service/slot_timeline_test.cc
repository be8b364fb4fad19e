#include "controlplane/service/slot_timeline.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace controlplane::service
