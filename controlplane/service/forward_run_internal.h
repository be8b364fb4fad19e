// The forward run's moving cluster (forecast.cc's ForwardRun) and the state a kept run saves:
// the scheduler's cycles applied to a snapshot turn by turn, each job's expected end standing in
// for the agents. Private to forecast.cc, which is the forward run (forecast.h).
#pragma once

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/time_util.h"
#include "controlplane/service/forecast.h"
#include "controlplane/service/pending_queue.h"
#include "controlplane/service/slot_timeline.h"

namespace controlplane::service {

// A kept run's state at the start of one turn (before its decision): what ForwardRun holds
// beside its queue, which is kept as its marks (PendingQueue::taken_marks).
struct PlanCheckpoint {
  size_t turn = 0;
  int cycles = 0;              // Schedule() calls before this turn
  std::vector<int64_t> ended;  // the jobs whose ends led to this turn
  ClusterSnapshot s;           // no pending jobs: the queue holds them
  std::array<std::vector<int64_t>, kSlotKinds> free_hist;
  std::map<std::tuple<int, int, int>, int64_t> shapes;
  std::vector<int64_t> ends;
  std::vector<char> taken;
};

namespace forecast_internal {

inline constexpr int64_t kNever = SlotTimeline::kForever;
// Turns between two saved states of a kept run: an answer replays at most this many turns before
// it reaches a turn it must decide, and a plan holds turns / this many copies of the cluster.
inline constexpr size_t kCheckpointEvery = 32;

inline int64_t LimitEnd(int64_t start_ms, int64_t limit_seconds) {
  return limit_seconds > 0 ? start_ms + limit_seconds * 1000 : kNever;
}

// The cluster as the run has moved it: the snapshot, with an expected end per running job.
class ForwardRun {
 public:
  // `extra`: the expected run time (ms) of one more job, beside `times` (a dry run's job).
  ForwardRun(ClusterSnapshot in, const ForecastTimes& times, const ForecastOptions& opt,
             std::optional<std::pair<int64_t, int64_t>> extra = std::nullopt)
      : s_(std::move(in)), times_(times), opt_(opt), extra_run_(extra) {
    if (!opt.reference) queue_ = PendingQueue(s_.pending);
    if (!s_.registered) {  // nodes neither join nor leave: their sizes, once for every cycle
      std::map<std::pair<int, int>, int64_t> sizes;
      for (const SchedNode& n : s_.nodes) sizes[{n.total_cpu, n.total_gpu}] += 1;
      std::vector<NodeShape> shapes;
      for (const auto& [size, count] : sizes) shapes.push_back({size.first, size.second, count});
      s_.registered = std::move(shapes);
    }
    for (size_t i = 0; i < s_.nodes.size(); ++i) {
      node_index_[s_.nodes[i].id] = i;
      Count(s_.nodes[i], +1);
    }
    for (const PendingJob& p : s_.pending) CountShape(p, +1);
    for (size_t i = 0; i < s_.tenants.size(); ++i) tenant_index_[s_.tenants[i].id] = i;
    const int64_t gone = s_.now_ms + std::max<int64_t>(opt.schedule.preempt_grace_ms, 1);
    for (const RunningJob& r : s_.running) {
      auto known = times_.running_end_ms.find(r.job_id);
      int64_t end = known != times_.running_end_ms.end()
                        ? std::min(known->second, LimitEnd(r.start_ms, r.time_limit_seconds))
                        : LimitEnd(r.start_ms, r.time_limit_seconds);
      if (r.preempting) end = std::min(end, gone);
      ends_.push_back(Clamp(end));
    }
  }

  // The state of a kept run saved at `from`, with `job` added to the kept queue it was built
  // from (`queue`: PendingQueue(that queue, job)). Its first decision is over the queue, as
  // every later one.
  ForwardRun(const PlanCheckpoint& from, PendingQueue queue, const PendingJob& job,
             const ForecastTimes& times, const ForecastOptions& opt,
             std::optional<std::pair<int64_t, int64_t>> extra)
      : s_(from.s),
        queue_(std::move(queue)),
        free_hist_(from.free_hist),
        shapes_(from.shapes),
        times_(times),
        opt_(opt),
        extra_run_(extra),
        ends_(from.ends),
        first_over_queue_(true) {
    for (size_t i = 0; i < s_.nodes.size(); ++i) node_index_[s_.nodes[i].id] = i;
    for (size_t i = 0; i < s_.tenants.size(); ++i) tenant_index_[s_.tenants[i].id] = i;
    CountShape(job, +1);
  }

  // This state at the start of `turn`.
  std::unique_ptr<const PlanCheckpoint> Save(size_t turn, int cycles,
                                             const std::vector<int64_t>& ended) const {
    auto c = std::make_unique<PlanCheckpoint>();
    c->turn = turn;
    c->cycles = cycles;
    c->ended = ended;
    c->s.now_ms = s_.now_ms;
    c->s.nodes = s_.nodes;
    c->s.registered = s_.registered;
    c->s.tenants = s_.tenants;
    c->s.running = s_.running;
    c->free_hist = free_hist_;
    c->shapes = shapes_;
    c->ends = ends_;
    c->taken = queue_.taken_marks();
    return c;
  }

  // Back to the kept run's state `c`, with `job` still queued: for a run built by the
  // constructor above from `base` and `job`, while the run has been the kept one.
  void Restore(const PlanCheckpoint& c, const PendingJob& job, const PendingQueue& base) {
    s_.now_ms = c.s.now_ms;
    s_.nodes = c.s.nodes;
    s_.tenants = c.s.tenants;
    s_.running = c.s.running;
    s_.pending.clear();
    free_hist_ = c.free_hist;
    shapes_ = c.shapes;
    CountShape(job, +1);
    ends_ = c.ends;
    queue_.SetTaken(c.taken, base);
  }

  const ClusterSnapshot& snapshot() const { return s_; }
  int64_t now() const { return s_.now_ms; }

  // The scheduler's decision now: Schedule() over the snapshot in the first cycle and in the
  // reference run, else over the kept queue (ScheduleQueue: no copy, no sort, and without
  // reasons it stops where the rest of the queue can change nothing).
  ScheduleDecision Decide(bool first, const ScheduleOptions& options) {
    if ((first && !first_over_queue_) || opt_.reference) return Schedule(s_, options);
    return ScheduleQueue(s_, queue_, options);
  }

  // Starts what `d` placed, `delay_ms` from now (holding the slots from now), and lets its
  // victims go.
  void Apply(const ScheduleDecision& d, int64_t delay_ms) {
    if (d.placements.empty() && d.preemptions.empty()) {
      if (!opt_.reference) s_.pending.clear();  // from here on the queue holds them
      return;
    }
    // The placed jobs, in placement order: from the queue, or (in the first cycle and the
    // reference run) from the snapshot's pending jobs.
    std::vector<const PendingJob*> pending(d.placements.size(), nullptr);
    if (opt_.reference || !s_.pending.empty()) {
      std::unordered_map<int64_t, size_t> at;
      for (size_t i = 0; i < d.placements.size(); ++i) at[d.placements[i].job_id] = i;
      for (const PendingJob& p : s_.pending) {
        if (auto it = at.find(p.job_id); it != at.end()) pending[it->second] = &p;
      }
    } else {
      for (size_t i = 0; i < d.placements.size(); ++i) {
        pending[i] = queue_.Find(d.placements[i].job_id);
      }
    }
    std::vector<int64_t> placed;
    std::vector<RunningJob> started;
    std::vector<int64_t> started_ends;
    started.reserve(d.placements.size());
    started_ends.reserve(d.placements.size());
    const int64_t start = s_.now_ms + delay_ms;
    for (size_t i = 0; i < d.placements.size(); ++i) {
      const Placement& pl = d.placements[i];
      if (!pending[i]) throw std::out_of_range("a placed job is not pending");
      const PendingJob& p = *pending[i];
      RunningJob r{p.job_id, p.tenant_id, p.priority, start, p.time_limit_seconds,
                   pl.slot_type, pl.nodes, false};
      Hold(r, +1);
      CountShape(p, -1);
      int64_t end = LimitEnd(start, p.time_limit_seconds);
      if (extra_run_ && extra_run_->first == p.job_id) {
        end = std::min(end, start + extra_run_->second);
      } else if (auto run = times_.run_ms.find(p.job_id); run != times_.run_ms.end()) {
        end = std::min(end, start + run->second);
      }
      started.push_back(std::move(r));
      started_ends.push_back(Clamp(end));
      placed.push_back(p.job_id);
    }
    std::sort(placed.begin(), placed.end());
    const int64_t gone = s_.now_ms + std::max<int64_t>(opt_.schedule.preempt_grace_ms, 1);
    for (const Preemption& pre : d.preemptions) {
      for (int64_t victim : pre.victims) {
        for (size_t i = 0; i < s_.running.size(); ++i) {
          if (s_.running[i].job_id != victim) continue;
          s_.running[i].preempting = true;
          ends_[i] = std::min(ends_[i], gone);
        }
      }
    }
    if (opt_.reference) {
      std::erase_if(s_.pending, [&](const PendingJob& p) {
        return std::binary_search(placed.begin(), placed.end(), p.job_id);
      });
    } else {
      s_.pending.clear();  // from here on the queue holds them
      for (int64_t id : placed) queue_.Take(id);
    }
    for (size_t i = 0; i < started.size(); ++i) {
      s_.running.push_back(std::move(started[i]));
      ends_.push_back(started_ends[i]);
    }
  }

  // Jumps to the next expected end and frees what ends then; false when nothing is expected to
  // end. `ended` gets the jobs that did.
  bool Advance(std::vector<int64_t>* ended) {
    int64_t next = kNever;
    for (int64_t e : ends_) next = std::min(next, e);
    if (next == kNever) return false;
    s_.now_ms = next;
    ended->clear();
    size_t kept = 0;
    for (size_t i = 0; i < s_.running.size(); ++i) {
      if (ends_[i] <= next) {
        Hold(s_.running[i], -1);
        ended->push_back(s_.running[i].job_id);
        continue;
      }
      if (kept != i) {
        s_.running[kept] = std::move(s_.running[i]);
        ends_[kept] = ends_[i];
      }
      ++kept;
    }
    s_.running.resize(kept);
    ends_.resize(kept);
    return true;
  }

  // False when Schedule() now could place nothing: no pending job's shape fits on the free
  // slots of the nodes that take jobs, before reservations and quotas. Preemption frees slots
  // that are not free, so with it on anything may change.
  bool MayPlace() const {
    if (opt_.schedule.preempt_min_priority) return true;
    for (const auto& [shape, count] : shapes_) {
      const auto [kind, slots, nodes] = shape;
      const std::vector<int64_t>& hist = free_hist_[kind];
      int64_t fit = 0;
      for (size_t f = std::max(slots, 0); f < hist.size() && fit < nodes; ++f) fit += hist[f];
      if (fit >= nodes) return true;
    }
    return false;
  }

  // The expected end of a job the run has started, if it is still running.
  std::optional<int64_t> EndOf(int64_t job_id) const {
    for (size_t i = 0; i < s_.running.size(); ++i) {
      if (s_.running[i].job_id == job_id) {
        return ends_[i] == kNever ? std::nullopt : std::optional<int64_t>(ends_[i]);
      }
    }
    return std::nullopt;
  }

 private:
  int64_t Clamp(int64_t end) const { return end == kNever ? kNever : std::max(end, s_.now_ms + 1); }

  // Takes (+1) or gives back (-1) a running job's slots on its nodes and in its tenant's counts.
  void Hold(const RunningJob& r, int sign) {
    int64_t slots = 0;
    for (const NodeShare& n : r.nodes) {
      slots += n.slots;
      auto it = node_index_.find(n.node_id);
      if (it == node_index_.end()) continue;
      SchedNode& node = s_.nodes[it->second];
      Count(node, -1);
      (r.slot_type == "gpu" ? node.free_gpu : node.free_cpu) -= sign * n.slots;
      Count(node, +1);
    }
    auto t = tenant_index_.find(r.tenant_id);
    if (t != tenant_index_.end()) {
      s_.tenants[t->second].slots_in_use += sign * slots;
      s_.tenants[t->second].running_jobs += sign;
    }
  }

  // Adds (+1) or removes (-1) a node that takes jobs in the histogram of free slots, as the
  // scheduler's FitNow counts them (clamped to the node's size).
  void Count(const SchedNode& n, int sign) {
    if (n.draining) return;
    const std::array<int, kSlotKinds> total{n.total_cpu, n.total_gpu};
    const std::array<int, kSlotKinds> free{n.free_cpu, n.free_gpu};
    for (int k = 0; k < kSlotKinds; ++k) {
      if (total[k] <= 0) continue;
      std::vector<int64_t>& hist = free_hist_[k];
      if (hist.size() < static_cast<size_t>(total[k]) + 1) hist.resize(total[k] + 1, 0);
      hist[std::clamp(free[k], 0, total[k])] += sign;
    }
  }

  void CountShape(const PendingJob& p, int sign) {
    const int kind = SlotKindOf(p.resources.slot_type);
    if (kind < 0) return;
    auto key = std::make_tuple(kind, p.resources.SlotsPerNode(), p.resources.nodes);
    if ((shapes_[key] += sign) == 0) shapes_.erase(key);
  }

  // pending: every job left in the reference run; otherwise only until the first Apply
  ClusterSnapshot s_;
  PendingQueue queue_;  // the pending jobs left, outside the reference run
  std::array<std::vector<int64_t>, kSlotKinds> free_hist_;  // usable nodes by free slots
  std::map<std::tuple<int, int, int>, int64_t> shapes_;     // pending (kind, slots, nodes)
  const ForecastTimes& times_;
  const ForecastOptions& opt_;
  const std::optional<std::pair<int64_t, int64_t>> extra_run_;
  std::vector<int64_t> ends_;  // parallel to s_.running; kNever: not expected to end
  std::unordered_map<int64_t, size_t> node_index_, tenant_index_;
  // The first decision over queue_ rather than s_.pending (a run started from a checkpoint).
  bool first_over_queue_ = false;
};

}  // namespace forecast_internal
}  // namespace controlplane::service
