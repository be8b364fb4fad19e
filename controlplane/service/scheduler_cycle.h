// The inside of one Schedule() call (scheduler.h says what it decides): a Cycle holds the
// working state while the pending jobs are considered one by one. Not an interface; only
// scheduler.cc constructs it. scheduler_cycle.cc orders and places jobs, scheduler_reserve.cc
// makes reservations and preemptions for the ones that cannot start, scheduler_queue.cc runs the
// same cycle over a kept queue (pending_queue.h).
//
// The model: every node has one SlotTimeline per slot type it has (a "lane"), built from what is
// free now plus the running jobs' expected ends. Placing a job takes slots on its lanes until the
// job's end; reserving holds slots from the reservation's start for good.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "controlplane/service/pending_queue.h"
#include "controlplane/service/scheduler.h"
#include "controlplane/service/slot_timeline.h"

namespace controlplane::service::sched_internal {

inline constexpr int64_t kForever = SlotTimeline::kForever;

inline int64_t EndOf(int64_t start_ms, int64_t limit_seconds) {
  return limit_seconds > 0 ? start_ms + limit_seconds * 1000 : kForever;
}

struct TenantRun {
  SchedTenant t;  // slots_in_use and running_jobs advance as this cycle places its jobs
  SlotCounts held{};
};

// A running job as the model sees it: where it holds slots and when they come back.
struct RunRecord {
  const RunningJob* job = nullptr;
  int kind = 0;
  int64_t release = kForever;
  std::vector<std::pair<int, int>> lanes;  // (lane, slots) on nodes in the snapshot
  bool victim = false;                     // preempted in this cycle
};

// Something that could not be done, remembered for the rest of the cycle: within a cycle the
// room on every lane only shrinks (until a preemption moves releases earlier, which forgets them
// all), so a job asking for at least as much fails too.
struct Shape {
  int kind = 0;
  int slots = 0;
  int nodes = 0;
  int64_t end = 0;   // placements: the job's end
  int priority = 0;  // preemptions: the job's priority
  // preemptions: the job's tenant, since whose jobs it may preempt depends on its share
  int64_t tenant = 0;
};

// The usable lanes of one kind by when each has room for good for `slots` (SlotTimeline::
// ReadyTime), soonest first, then by node id, lanes that never have room left out: what a
// reservation for jobs of `slots` slots per node picks its nodes from. Kept for the cycle and
// brought up to date from the lanes changed since (Cycle::touched_), so the reservations of a
// cycle do not each read every lane.
struct ReadyIndex {
  struct Entry {
    int64_t ready = 0;
    int64_t node_id = 0;
    int lane = 0;
  };
  int kind = 0;
  int slots = 0;
  size_t seen = 0;  // touched_ lanes already accounted for
  std::vector<Entry> by_time;
};

class Cycle {
 public:
  Cycle(const ClusterSnapshot& in, const ScheduleOptions& opt);
  ScheduleDecision Run();
  // Run() over `queue` instead of the snapshot's pending jobs, in the same order. With reasons
  // off it stops once the rest of the queue can change nothing (Settled): `order` then lists
  // the jobs considered only.
  ScheduleDecision RunQueue(const PendingQueue& queue);

 private:
  int TenantIndex(int64_t tenant_id);
  double Share(const TenantRun& t) const;
  void Consider(const PendingJob& job);
  bool TryPlace(const PendingJob& job, TenantRun& tenant, int kind, int64_t end);
  bool TryPreempt(const PendingJob& job, int kind, std::string* reason);
  bool TryReserve(const PendingJob& job, int kind, std::string* reason);
  // Reserves `lanes` for `job` from `start` and records it.
  void Hold(const PendingJob& job, const std::vector<int>& lanes, int64_t start);
  void TakeNow(int lane, int slots, int64_t end);
  // Moves `lane`'s curve by `delta` from `t` on, noting the change for the ready indexes.
  void StepLane(int lane, int64_t t, int delta) {
    lanes_[lane].Step(t, delta);
    touched_.push_back(lane);
  }
  // The ready index of (kind, slots), up to date with every lane changed so far.
  const ReadyIndex& ReadyIndexOf(int kind, int slots);
  int64_t FitNow(int kind, int slots) const;
  std::string WaitReason(const PendingJob& job, int kind, int64_t end) const;
  // Whether `job_id`'s reason is written (ScheduleOptions::explain, explain_job).
  bool Explains(int64_t job_id) const {
    return opt_.explain && (opt_.explain_job == 0 || opt_.explain_job == job_id);
  }
  int64_t NodeIdOfLane(int lane) const { return in_.nodes[lane / kSlotKinds].id; }
  void ForgetFailures();
  // True when TryPlace of a job of `shape` would fail now.
  bool CannotPlace(const PendingQueue::Shape& shape) const;
  // CannotPlace's cheap part: too few nodes with room, or a failed placement that asked no more
  // (no scan of the lanes).
  bool KnownUnplaceable(const PendingQueue::Shape& shape) const;
  // True when TryReserve of a job of `shape` fails at once: one for no more failed this cycle.
  bool CannotReserve(const PendingQueue::Shape& shape) const;
  // True when considering a job of `shape` now changes nothing, preemption aside: it is known
  // not to fit (KnownUnplaceable) and cannot reserve (every reservation made, or
  // CannotReserve). Room only shrinks and failures only accumulate within a cycle, so it stays
  // true for the rest of the cycle while preemption is off.
  bool Inert(const PendingQueue::Shape& shape) const;
  // True when considering the jobs of `queue` not yet considered (`considered`: how many of each
  // of queue.shapes()) can place, reserve and preempt nothing: no job left could be placed, nor
  // reserve while reservations are left (with preemption on, none may be left). `unplaceable`:
  // the shapes left that ask no more than the others.
  bool Settled(const PendingQueue& queue, const std::vector<int64_t>& considered,
               std::vector<JobShape>* unplaceable) const;

  const ClusterSnapshot& in_;
  const ScheduleOptions& opt_;
  const int64_t now_;
  std::vector<SlotTimeline> lanes_;                          // node index * kSlotKinds + kind
  std::array<std::vector<int>, kSlotKinds> usable_;          // lanes of nodes not draining
  std::array<std::vector<int64_t>, kSlotKinds> free_hist_;   // usable lanes by free slots now
  const NodeSizes registered_;                               // for "never fits" (job_fit.h)
  SlotCounts cluster_total_{};
  SlotSeconds cluster_usage_{};  // the shares' denominator this cycle (fair_share.h)
  std::vector<TenantRun> tenants_;
  std::unordered_map<int64_t, int> tenant_index_;
  std::vector<RunRecord> running_;
  std::vector<Shape> failed_place_, failed_reserve_, failed_preempt_;
  int reservations_ = 0;
  std::vector<int> scratch_;
  std::vector<char> lane_usable_;        // by lane: in usable_
  std::vector<int> touched_;             // lanes changed since the cycle began, in order
  std::vector<ReadyIndex> ready_index_;  // one per (kind, slots) reserved for this cycle
  ScheduleDecision out_;
};

}  // namespace controlplane::service::sched_internal
