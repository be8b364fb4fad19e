// SlotTimeline: the free slots of one slot type on one node as the scheduler expects them to
// change over time. It is what is free now plus steps in the future: + where a running job's time
// limit ends (or a job being preempted is expected to have exited), - where a reservation starts
// holding slots for a job that waits.
//
// The scheduler's two rules read off this curve: a job may start now on a node only if taking
// its slots until its end keeps the curve at or above zero everywhere (so nothing started now
// delays a reservation), and a reservation starts at the earliest time from which the curve stays
// at or above what the reserving job needs. Jobs without a time limit never give their slots back
// in this model, and reservations hold theirs for good. Times are milliseconds since the epoch.
#pragma once

#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace controlplane::service {

class SlotTimeline {
 public:
  static constexpr int64_t kForever = std::numeric_limits<int64_t>::max();

  SlotTimeline() = default;
  explicit SlotTimeline(int free_now) : free_now_(free_now), min_future_(free_now) {
    steps_.reserve(4);  // a running job's end and a reservation or two, in one allocation
  }

  int free_now() const { return free_now_; }
  // The lowest the curve goes, now or at any time after.
  int min_future() const { return min_future_; }
  // The lowest the curve goes over [now, end); kForever: ever.
  int MinFreeBefore(int64_t end) const;
  // True when `slots` can be taken now until `end` without the curve going below zero.
  bool CanTake(int slots, int64_t end) const {
    return free_now_ >= slots && (min_future_ >= slots || MinFreeBefore(end) >= slots);
  }
  // The earliest time, `now` or a step, from which at least `slots` stay free for good;
  // kForever when that never happens.
  int64_t ReadyTime(int slots, int64_t now) const;

  // A job takes `slots` now and gives them back at `end` (kForever: never).
  void Take(int slots, int64_t end);
  // The curve moves by `delta` from time `t` on (t after now). Step(t, -d) undoes Step(t, d).
  void Step(int64_t t, int delta);

 private:
  void RecomputeMin();

  int free_now_ = 0;
  std::vector<std::pair<int64_t, int>> steps_;  // (time, delta), by time, one per time, no zeros
  int min_future_ = 0;
};

}  // namespace controlplane::service
