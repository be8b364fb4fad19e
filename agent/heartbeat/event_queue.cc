#include "agent/heartbeat/event_queue.h"

#include <algorithm>

namespace agent {

EventQueue::EventQueue(size_t max_events, size_t max_bytes)
    : max_events_(std::max<size_t>(max_events, 1)), max_bytes_(std::max<size_t>(max_bytes, 1)) {}

size_t EventQueue::SizeOf(const api::JobEventReport& event) {
  // The fields around the data in the heartbeat ({"job_id":..,"time_ms":..,"type":..}) too.
  constexpr size_t kEnvelope = 64;
  return event.data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).size() +
         event.type.size() + kEnvelope;
}

bool EventQueue::PushAll(std::vector<api::JobEventReport> events) {
  std::vector<size_t> sizes;
  size_t need_bytes = 0;
  for (const auto& e : events) {
    sizes.push_back(SizeOf(e));
    need_bytes += sizes.back();
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (events.size() > max_events_ || need_bytes > max_bytes_) {
    refused_ += events.size();
    return false;
  }
  const auto fits = [&] {
    return queue_.size() + events.size() <= max_events_ && bytes_ + need_bytes <= max_bytes_;
  };
  if (!fits()) {
    // Whether dropping every queued step event would be enough; if not, drop none.
    size_t step_events = 0, step_bytes = 0;
    for (const Entry& e : queue_) {
      if (e.event.type == "step") {
        ++step_events;
        step_bytes += e.bytes;
      }
    }
    if (queue_.size() - step_events + events.size() > max_events_ ||
        bytes_ - step_bytes + need_bytes > max_bytes_) {
      refused_ += events.size();
      return false;
    }
    for (auto it = queue_.begin(); it != queue_.end() && !fits();) {
      if (it->event.type != "step") {
        ++it;
        continue;
      }
      bytes_ -= it->bytes;
      ++dropped_;
      it = queue_.erase(it);
    }
  }
  for (size_t i = 0; i < events.size(); ++i) {
    bytes_ += sizes[i];
    queue_.push_back({next_seq_++, sizes[i], std::move(events[i])});
  }
  return true;
}

bool EventQueue::Push(api::JobEventReport event) {
  std::vector<api::JobEventReport> one;
  one.push_back(std::move(event));
  return PushAll(std::move(one));
}

EventQueue::Batch EventQueue::Peek(size_t max_events, size_t max_bytes) const {
  std::lock_guard<std::mutex> lock(mu_);
  Batch b;
  size_t bytes = 0;
  bool full = false;
  for (const auto& e : queue_) {
    if (!full && b.events.size() < max_events &&
        (b.events.empty() || bytes + e.bytes <= max_bytes)) {
      b.events.push_back(e.event);
      b.last_seq = e.seq;
      bytes += e.bytes;
    } else {
      full = true;  // in order: nothing after the first event left out goes either
      b.jobs_with_more.insert(e.event.job_id);
    }
  }
  return b;
}

void EventQueue::Commit(uint64_t last_seq) {
  std::lock_guard<std::mutex> lock(mu_);
  while (!queue_.empty() && queue_.front().seq <= last_seq) {
    bytes_ -= queue_.front().bytes;
    queue_.pop_front();
  }
}

size_t EventQueue::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

size_t EventQueue::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

uint64_t EventQueue::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

uint64_t EventQueue::refused() const {
  std::lock_guard<std::mutex> lock(mu_);
  return refused_;
}

}  // namespace agent
