// The agent's buffer of job events on their way to the server.
//
// Events are kept until a heartbeat that carried them succeeds (two-phase like the logs: Peek,
// then Commit). The queue is bounded in events and in bytes (each event counted as its compact
// JSON), so a chatty job, or a server unreachable for long, cannot grow the agent without limit.
// Room for new events is made by dropping the oldest `step` events first: they are metrics that
// later steps supersede, and the server thins them anyway. Other events (checkpoints, eval,
// dataset reports, a user program's own) are never dropped for room: when only they fill the
// queue, a post is refused whole (the local API answers 429) and the job may retry. Both are
// counted. One Peek takes at most a given number of events and bytes, so one heartbeat stays
// small however much is queued; the rest goes next time. Thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <set>
#include <vector>

#include "api/agent_protocol.h"

namespace agent {

class EventQueue {
 public:
  static constexpr size_t kDefaultMaxEvents = 10000;
  static constexpr size_t kDefaultMaxBytes = 16 * 1024 * 1024;

  explicit EventQueue(size_t max_events = kDefaultMaxEvents, size_t max_bytes = kDefaultMaxBytes);

  // Queues every one of `events` or none: true when queued (after dropping as many of the oldest
  // step events as needed to make room), false when even that cannot make room.
  bool PushAll(std::vector<api::JobEventReport> events);
  bool Push(api::JobEventReport event);

  struct Batch {
    std::vector<api::JobEventReport> events;
    uint64_t last_seq = 0;             // pass to Commit
    std::set<int64_t> jobs_with_more;  // jobs with queued events that are not in this batch
  };
  // The oldest events, left in the queue: at most `max_events`, and no more than `max_bytes` of
  // them unless the first alone is larger (it goes alone, so nothing is stuck).
  Batch Peek(size_t max_events, size_t max_bytes = SIZE_MAX) const;
  // Removes every event up to and including `last_seq`.
  void Commit(uint64_t last_seq);

  size_t size() const;
  size_t bytes() const;
  uint64_t dropped() const;   // step events dropped to make room, in all
  uint64_t refused() const;   // events of pushes refused for want of room, in all

  // The bytes an event counts for: its compact JSON, type and data.
  static size_t SizeOf(const api::JobEventReport& event);

 private:
  struct Entry {
    uint64_t seq;
    size_t bytes;
    api::JobEventReport event;
  };
  const size_t max_events_;
  const size_t max_bytes_;
  mutable std::mutex mu_;
  std::deque<Entry> queue_;
  size_t bytes_ = 0;
  uint64_t next_seq_ = 1;
  uint64_t dropped_ = 0;
  uint64_t refused_ = 0;
};

}  // namespace agent
