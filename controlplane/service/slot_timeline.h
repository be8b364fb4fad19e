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
//
// The scheduler builds one per node and slot type every cycle, and a forecast decides hundreds of
// cycles per answer: the first few steps (a running job's end, a reservation or two) are kept
// inside the object, so building a lane allocates nothing.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace controlplane::service {

class SlotTimeline {
 public:
  static constexpr int64_t kForever = std::numeric_limits<int64_t>::max();

  SlotTimeline() = default;
  explicit SlotTimeline(int free_now) : free_now_(free_now), min_future_(free_now) {}

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
  struct TimeStep {
    int64_t first = 0;  // time
    int second = 0;     // delta
  };
  static constexpr size_t kInlineSteps = 4;

  void RecomputeMin();
  const TimeStep* steps_begin() const { return spilled_ ? spill_.data() : inline_.data(); }
  const TimeStep* steps_end() const { return steps_begin() + steps_size(); }
  size_t steps_size() const { return spilled_ ? spill_.size() : inline_size_; }

  int free_now_ = 0;
  int min_future_ = 0;
  // The steps, by time, one per time, no zeros: in inline_ (the first inline_size_) until they
  // outgrow it, then in spill_ for good.
  bool spilled_ = false;
  unsigned char inline_size_ = 0;
  std::array<TimeStep, kInlineSteps> inline_;
  std::vector<TimeStep> spill_;
};

}  // namespace controlplane::service
