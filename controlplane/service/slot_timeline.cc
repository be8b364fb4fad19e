#include "controlplane/service/slot_timeline.h"

#include <algorithm>

namespace controlplane::service {

int SlotTimeline::MinFreeBefore(int64_t end) const {
  int level = free_now_;
  int lowest = free_now_;
  for (const TimeStep *s = steps_begin(), *e = steps_end(); s != e; ++s) {
    const auto [t, delta] = *s;
    if (t >= end) break;
    level += delta;
    lowest = std::min(lowest, level);
  }
  return lowest;
}

int64_t SlotTimeline::ReadyTime(int slots, int64_t now) const {
  if (min_future_ >= slots) return now;
  const TimeStep* steps = steps_begin();
  const size_t n = steps_size();
  if (n == 0) return kForever;  // short now, and for good
  // The curve is good for good from the step after the last one after which it is below
  // `slots`; when no level after a step is short, only the level before the first one was.
  int64_t ready = steps[0].first;
  int level = free_now_;
  for (size_t i = 0; i < n; ++i) {
    level += steps[i].second;
    if (level < slots) ready = i + 1 < n ? steps[i + 1].first : kForever;
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
  auto before = [](const TimeStep& s, int64_t v) { return s.first < v; };
  if (!spilled_) {
    TimeStep* begin = inline_.data();
    TimeStep* end = begin + inline_size_;
    TimeStep* it = std::lower_bound(begin, end, t, before);
    if (it != end && it->first == t) {
      it->second += delta;
      if (it->second == 0) {
        std::move(it + 1, end, it);
        --inline_size_;
      }
      RecomputeMin();
      return;
    }
    if (inline_size_ < inline_.size()) {
      std::move_backward(it, end, end + 1);
      *it = {t, delta};
      ++inline_size_;
      RecomputeMin();
      return;
    }
    spill_.assign(begin, end);  // full: from here on the steps live on the heap
    spilled_ = true;
    inline_size_ = 0;
  }
  auto it = std::lower_bound(spill_.begin(), spill_.end(), t, before);
  if (it != spill_.end() && it->first == t) {
    it->second += delta;
    if (it->second == 0) spill_.erase(it);
  } else {
    spill_.insert(it, {t, delta});
  }
  RecomputeMin();
}

void SlotTimeline::RecomputeMin() { min_future_ = MinFreeBefore(kForever); }

}  // namespace controlplane::service
