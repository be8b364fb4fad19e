#include "controlplane/service/node_waiters.h"

#include <optional>

namespace controlplane::service {

uint64_t NodeWaiters::Generation(int64_t node_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = generation_.find(node_id);
  return all_generation_ + (it == generation_.end() ? 0 : it->second);
}

bool NodeWaiters::Wait(int64_t node_id, uint64_t seen, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  auto now_gen = [&] {
    auto it = generation_.find(node_id);
    return all_generation_ + (it == generation_.end() ? 0 : it->second);
  };
  if (now_gen() != seen) return true;
  if (shutdown_ || held_ >= max_held_) return false;
  ++held_;
  const bool woken =
      cv_.wait_for(lock, timeout, [&] { return shutdown_ || now_gen() != seen; }) && !shutdown_;
  --held_;
  return woken;
}

void NodeWaiters::Notify(int64_t node_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++generation_[node_id];
  }
  cv_.notify_all();
}

void NodeWaiters::Notify(const std::vector<int64_t>& node_ids) {
  if (node_ids.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int64_t id : node_ids) ++generation_[id];
  }
  cv_.notify_all();
}

void NodeWaiters::NotifyAll() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++all_generation_;
  }
  cv_.notify_all();
}

void NodeWaiters::PassDone(uint64_t seq) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (seq <= passes_done_) return;
    passes_done_ = seq;
  }
  cv_.notify_all();
}

NodeWaiters::PassWait NodeWaiters::WaitForPass(int64_t node_id, uint64_t seen, uint64_t pass,
                                               std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  auto now_gen = [&] {
    auto it = generation_.find(node_id);
    return all_generation_ + (it == generation_.end() ? 0 : it->second);
  };
  // The node's generation first: a pass that gave this node a command notified it before it
  // said it was over.
  auto outcome = [&]() -> std::optional<PassWait> {
    if (now_gen() != seen) return PassWait::kNotified;
    if (passes_done_ >= pass) return PassWait::kPassDone;
    return std::nullopt;
  };
  if (auto o = outcome()) return *o;
  if (shutdown_ || held_ >= max_held_) return PassWait::kTimedOut;
  ++held_;
  std::optional<PassWait> o;
  cv_.wait_for(lock, timeout, [&] { return shutdown_ || (o = outcome()).has_value(); });
  --held_;
  if (shutdown_ || !o) return PassWait::kTimedOut;
  return *o;
}

void NodeWaiters::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
  }
  cv_.notify_all();
}

int NodeWaiters::held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_;
}

}  // namespace controlplane::service
