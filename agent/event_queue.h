// The agent's buffer of job events on their way to the server.
//
// Events are kept until a heartbeat that carried them succeeds (two-phase like the logs: Peek,
// then Commit). The queue is bounded: while the server is unreachable for long, the oldest events
// are dropped and counted, so a chatty job cannot grow the agent without limit. Thread-safe.
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
  static constexpr size_t kDefaultCapacity = 10000;
  explicit EventQueue(size_t capacity = kDefaultCapacity);

  void Push(api::JobEventReport event);

  struct Batch {
    std::vector<api::JobEventReport> events;
    uint64_t last_seq = 0;             // pass to Commit
    std::set<int64_t> jobs_with_more;  // jobs with queued events that are not in this batch
  };
  // The oldest `max` events, left in the queue.
  Batch Peek(size_t max) const;
  // Removes every event up to and including `last_seq`.
  void Commit(uint64_t last_seq);

  size_t size() const;
  uint64_t dropped() const;

 private:
  struct Entry {
    uint64_t seq;
    api::JobEventReport event;
  };
  const size_t capacity_;
  mutable std::mutex mu_;
  std::deque<Entry> queue_;
  uint64_t next_seq_ = 1;
  uint64_t dropped_ = 0;
};

}  // namespace agent
