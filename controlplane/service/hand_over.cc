// The learned hand-over time (hand_over.h).
#include "controlplane/service/hand_over.h"

#include <algorithm>

namespace controlplane::service {

void HandOverClock::Freed(const std::vector<int64_t>& node_ids, int64_t at_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  for (int64_t n : node_ids) freed_ms_[n] = at_ms;
}

void HandOverClock::Started(const std::vector<int64_t>& node_ids, int64_t submit_ms,
                            int64_t at_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  std::optional<int64_t> last;  // the last end the job waited for
  for (int64_t n : node_ids) {
    auto it = freed_ms_.find(n);
    if (it == freed_ms_.end()) continue;
    if (it->second >= submit_ms) last = std::max(last.value_or(it->second), it->second);
    freed_ms_.erase(it);
  }
  if (!last || at_ms < *last || at_ms - *last > max_gap_ms_) return;
  samples_.push_back(at_ms - *last);
  sum_ += samples_.back();
  if (samples_.size() > window_) {
    sum_ -= samples_.front();
    samples_.pop_front();
  }
}

std::optional<int64_t> HandOverClock::MeanMs() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (samples_.empty() || samples_.size() < min_samples_) return std::nullopt;
  return sum_ / static_cast<int64_t>(samples_.size());
}

size_t HandOverClock::samples() const {
  std::lock_guard<std::mutex> lock(mu_);
  return samples_.size();
}

}  // namespace controlplane::service
