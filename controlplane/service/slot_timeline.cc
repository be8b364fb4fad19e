#include "controlplane/service/slot_timeline.h"

#include <algorithm>

namespace controlplane::service {

int SlotTimeline::MinFreeBefore(int64_t end) const {
  int level = free_now_;
  int lowest = free_now_;
  for (const auto& [t, delta] : steps_) {
    if (t >= end) break;
    level += delta;
    lowest = std::min(lowest, level);
  }
  return lowest;
}

int64_t SlotTimeline::ReadyTime(int slots, int64_t now) const {
  if (min_future_ >= slots) return now;
  if (steps_.empty()) return kForever;  // short now, and for good
  // The curve is good for good from the step after the last one after which it is below
  // `slots`; when no level after a step is short, only the level before the first one was.
  int64_t ready = steps_.front().first;
  int level = free_now_;
  const size_t n = steps_.size();
  for (size_t i = 0; i < n; ++i) {
    level += steps_[i].second;
    if (level < slots) ready = i + 1 < n ? steps_[i + 1].first : kForever;
  }
  return ready;
}

void SlotTimeline::Take(int slots, int64_t end) {
  free_now_ -= slots;
  if (end != kForever) {
    Step(end, slots);  // recomputes the minimum
  } else {
    min_future_ -= slots;
  }
}

void SlotTimeline::Step(int64_t t, int delta) {
  if (delta == 0) return;
  auto it = std::lower_bound(steps_.begin(), steps_.end(), t,
                             [](const std::pair<int64_t, int>& s, int64_t v) { return s.first < v; });
  if (it != steps_.end() && it->first == t) {
    it->second += delta;
    if (it->second == 0) steps_.erase(it);
  } else {
    steps_.insert(it, {t, delta});
  }
  RecomputeMin();
}

void SlotTimeline::RecomputeMin() { min_future_ = MinFreeBefore(kForever); }

}  // namespace controlplane::service
