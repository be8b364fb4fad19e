#include "agent/event_queue.h"

namespace agent {

EventQueue::EventQueue(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

void EventQueue::Push(api::JobEventReport event) {
  std::lock_guard<std::mutex> lock(mu_);
  while (queue_.size() >= capacity_) {
    queue_.pop_front();
    ++dropped_;
  }
  queue_.push_back({next_seq_++, std::move(event)});
}

EventQueue::Batch EventQueue::Peek(size_t max) const {
  std::lock_guard<std::mutex> lock(mu_);
  Batch b;
  for (const auto& e : queue_) {
    if (b.events.size() < max) {
      b.events.push_back(e.event);
      b.last_seq = e.seq;
    } else {
      b.jobs_with_more.insert(e.event.job_id);
    }
  }
  return b;
}

void EventQueue::Commit(uint64_t last_seq) {
  std::lock_guard<std::mutex> lock(mu_);
  while (!queue_.empty() && queue_.front().seq <= last_seq) queue_.pop_front();
}

size_t EventQueue::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

uint64_t EventQueue::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

}  // namespace agent
