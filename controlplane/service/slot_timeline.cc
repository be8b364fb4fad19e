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
  // Level after each step, then the last step after which the level dipped below `slots`: the
  // curve is good for good from the step after it.
  std::vector<int> level(steps_.size());
  int running = free_now_;
  for (size_t i = 0; i < steps_.size(); ++i) {
    running += steps_[i].second;
    level[i] = running;
  }
  for (size_t i = steps_.size(); i-- > 0;) {
    if (level[i] < slots) return i + 1 < steps_.size() ? steps_[i + 1].first : kForever;
  }
  // Every level after a step is enough, so only the level before the first step was short.
  return steps_.empty() ? kForever : steps_.front().first;
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
