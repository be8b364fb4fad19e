#include "agent/heartbeat/event_queue.h"

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

api::JobEventReport Note(int64_t job, size_t bytes) {
  return {job, 0, "note", {{"type", "note"}, {"blob", std::string(bytes, 'x')}}};
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

// Bounded in bytes: room is made by dropping the oldest step events, never other events; when that
// is not enough the push is refused whole and counted.
TEST(EventQueueTest, BoundedInBytesDroppingOldStepEventsFirst) {
  const size_t note = EventQueue::SizeOf(Note(1, 1000));
  const size_t step = EventQueue::SizeOf(Ev(1, 0));
  EventQueue q(100, 2 * note + 2 * step);
  ASSERT_TRUE(q.Push(Ev(1, 0)));
  ASSERT_TRUE(q.Push(Note(1, 1000)));
  ASSERT_TRUE(q.Push(Ev(1, 1)));
  ASSERT_TRUE(q.Push(Ev(1, 2)));
  EXPECT_EQ(q.bytes(), note + 3 * step);
  // A second note (a byte larger) needs more than one step event's room: the two oldest go.
  ASSERT_TRUE(q.Push(Note(2, 1000 + 1)));
  EXPECT_EQ(q.dropped(), 2u);
  auto b = q.Peek(10);
  ASSERT_EQ(b.events.size(), 3u);
  EXPECT_EQ(b.events[0].type, "note");
  EXPECT_EQ(b.events[1].data["step"], 2);
  EXPECT_EQ(b.events[2].job_id, 2);
  // Only notes and one step left: a third note cannot fit however many steps go. Refused whole,
  // nothing dropped for it.
  std::vector<api::JobEventReport> two = {Ev(3, 9), Note(3, 1000)};
  EXPECT_FALSE(q.PushAll(std::move(two)));
  EXPECT_EQ(q.refused(), 2u);
  EXPECT_EQ(q.dropped(), 2u);
  EXPECT_EQ(q.size(), 3u);
  // Once the server has them, there is room again.
  q.Commit(q.Peek(10).last_seq);
  EXPECT_EQ(q.bytes(), 0u);
  EXPECT_TRUE(q.Push(Note(3, 1000)));
}

// One heartbeat carries at most the given bytes; an event larger than that goes alone.
TEST(EventQueueTest, PeekIsBoundedInBytesAndKeepsOrder) {
  EventQueue q;
  const size_t note = EventQueue::SizeOf(Note(1, 1000));
  for (int i = 0; i < 5; ++i) q.Push(Note(1 + i % 2, 1000));
  auto b = q.Peek(100, 2 * note + 10);
  ASSERT_EQ(b.events.size(), 2u);
  EXPECT_EQ(b.jobs_with_more, (std::set<int64_t>{1, 2}));
  q.Commit(b.last_seq);
  EXPECT_EQ(q.size(), 3u);
  auto one = q.Peek(100, 10);
  EXPECT_EQ(one.events.size(), 1u);
}

}  // namespace
}  // namespace agent
