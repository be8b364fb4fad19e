#include "agent/event_queue.h"

#include <gtest/gtest.h>

namespace agent {
namespace {

api::JobEventReport Ev(int64_t job, int step) {
  return {job, 0, "step", {{"type", "step"}, {"step", step}}};
}

TEST(EventQueueTest, PeekDoesNotRemoveCommitDoes) {
  EventQueue q(10);
  q.Push(Ev(1, 1));
  q.Push(Ev(1, 2));
  q.Push(Ev(2, 1));
  auto b = q.Peek(2);
  ASSERT_EQ(b.events.size(), 2u);
  EXPECT_EQ(b.jobs_with_more, std::set<int64_t>{2});
  EXPECT_EQ(q.size(), 3u);
  q.Push(Ev(3, 1));  // arrives while the batch is in flight
  q.Commit(b.last_seq);
  ASSERT_EQ(q.size(), 2u);
  auto rest = q.Peek(10);
  EXPECT_EQ(rest.events[0].job_id, 2);
  EXPECT_EQ(rest.events[1].job_id, 3);
  EXPECT_TRUE(rest.jobs_with_more.empty());
}

TEST(EventQueueTest, DropsOldestWhenFull) {
  EventQueue q(3);
  for (int i = 0; i < 5; ++i) q.Push(Ev(1, i));
  EXPECT_EQ(q.size(), 3u);
  EXPECT_EQ(q.dropped(), 2u);
  auto b = q.Peek(10);
  EXPECT_EQ(b.events.front().data["step"], 2);
  EXPECT_EQ(b.events.back().data["step"], 4);
}

}  // namespace
}  // namespace agent
