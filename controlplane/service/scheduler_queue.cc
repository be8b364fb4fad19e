// One scheduling cycle over a kept queue (pending_queue.h): the order of Cycle::Run() without
// sorting, and, with reasons off, an end as soon as the rest of the queue can change nothing.
//
// Why stopping is exact: a job not yet considered changes something only by being placed, by
// reserving (while reservations are left) or by preempting (the same, with preemption on);
// quotas and "never fits" only read. Room only shrinks while nothing is placed or reserved, so
// when no shape left can be placed now, and no shape left can reserve (every reservation made,
// or a reservation for no more slots and nodes failed in this cycle, as TryReserve remembers),
// none of the jobs left will change anything. With preemption on, the cycle stops only once
// every reservation is made.
#include <algorithm>
#include <functional>
#include <queue>
#include <tuple>

#include "controlplane/service/scheduler_cycle.h"

namespace controlplane::service::sched_internal {

namespace {

// Considerations between two checks for the end while nothing is placed: a shape that looked
// placeable may belong only to jobs that wait on a quota.
constexpr int kRecheckEvery = 64;

}  // namespace

bool Cycle::KnownUnplaceable(const PendingQueue::Shape& shape) const {
  const auto [kind, slots, nodes, limit] = shape;
  if (kind < 0 || FitNow(kind, slots) < nodes) return true;
  const int64_t end = EndOf(now_, limit);
  for (const Shape& f : failed_place_) {
    if (f.kind == kind && f.slots <= slots && f.nodes <= nodes && f.end <= end) return true;
  }
  return false;
}

bool Cycle::CannotPlace(const PendingQueue::Shape& shape) const {
  if (KnownUnplaceable(shape)) return true;
  const auto [kind, slots, nodes, limit] = shape;
  const int64_t end = EndOf(now_, limit);
  int fit = 0;
  for (int lane : usable_[kind]) {
    if (lanes_[lane].CanTake(slots, end) && ++fit >= nodes) return false;
  }
  return true;
}

bool Cycle::CannotReserve(const PendingQueue::Shape& shape) const {
  const auto [kind, slots, nodes, limit] = shape;
  for (const Shape& f : failed_reserve_) {
    if (f.kind == kind && f.slots <= slots && f.nodes <= nodes) return true;
  }
  return kind < 0;
}

bool Cycle::Inert(const PendingQueue::Shape& shape) const {
  return KnownUnplaceable(shape) &&
         (reservations_ >= opt_.max_reservations || CannotReserve(shape));
}

bool Cycle::Settled(const PendingQueue& queue, const std::vector<int64_t>& considered,
                    std::vector<JobShape>* unplaceable) const {
  if (opt_.explain) return false;
  if (reservations_ < opt_.max_reservations && opt_.preempt_min_priority) return false;
  unplaceable->clear();
  const std::vector<PendingQueue::Shape>& shapes = queue.shapes();
  for (size_t i = 0; i < shapes.size(); ++i) {
    const PendingQueue::Shape& shape = shapes[i];
    if (queue.shapes_left()[i] - considered[i] <= 0) continue;
    if (!CannotPlace(shape) || (reservations_ < opt_.max_reservations && !CannotReserve(shape))) {
      return false;
    }
    if (std::any_of(unplaceable->begin(), unplaceable->end(),
                    [&](const JobShape& u) { return AsksNoMore(u, shape); })) {
      continue;
    }
    std::erase_if(*unplaceable, [&](const JobShape& u) { return AsksNoMore(shape, u); });
    unplaceable->push_back(shape);
  }
  return true;
}

ScheduleDecision Cycle::RunQueue(const PendingQueue& queue) {
  std::vector<TenantUsage> usage;
  usage.reserve(tenants_.size());
  for (const TenantRun& t : tenants_) usage.push_back({t.t.usage, t.held});
  cluster_usage_ = ClusterUsage(usage, cluster_total_);
  const std::vector<PendingJob>& jobs = queue.jobs();
  const std::vector<PendingQueue::Run>& runs = queue.runs();
  std::vector<int> tenant_of(runs.size());
  for (size_t r = 0; r < runs.size(); ++r)
    tenant_of[r] = TenantIndex(jobs[runs[r].begin].tenant_id);

  // How many jobs of each of queue.shapes() this cycle considered.
  std::vector<int64_t> considered(queue.shapes().size(), 0);
  bool settled_checked = false;  // since the last change of room
  int since_check = 0;
  std::vector<JobShape> unplaceable;
  auto settled = [&] {
    if (opt_.explain) return false;
    if (settled_checked && since_check < kRecheckEvery) return false;
    settled_checked = true;
    since_check = 0;
    return Settled(queue, considered, &unplaceable);
  };

  // Jobs whose shape can neither be placed nor reserve any more in this cycle change nothing
  // when considered (room only shrinks, and the failures remembered only grow, while
  // preemption is off), so without reasons they are passed over where their tenant's turn
  // would reach them, counted as considered, instead of taking a turn each. A run's last job
  // keeps its turn, so a stop still names the tenants with jobs left (QueueStop::tenants_left).
  // Known inert shapes stay so for the cycle; a shape found live is checked again only after
  // the room or the failures changed.
  const bool pass_inert = !opt_.explain && !opt_.preempt_min_priority;
  std::vector<char> inert(queue.shapes().size(), 0);
  std::vector<uint64_t> live_at(queue.shapes().size(), ~uint64_t{0});
  uint64_t changes = 0;  // placements, reservations and failures so far
  auto passed_over = [&](size_t at) {
    const int shape = queue.shape_of(at);
    if (shape < 0) return false;
    if (inert[shape]) return true;
    if (live_at[shape] == changes) return false;
    if (Inert(queue.shapes()[shape])) {
      inert[shape] = 1;
      return true;
    }
    live_at[shape] = changes;
    return false;
  };

  // As Run(): within one priority the tenant whose share is lowest goes next.
  using Turn = std::tuple<double, int64_t, int64_t, size_t, size_t>;  // ..., run, job index
  std::priority_queue<Turn, std::vector<Turn>, std::greater<Turn>> turns;
  auto push = [&](size_t run, size_t at) {
    while (at < runs[run].end && queue.taken(at)) ++at;
    if (pass_inert) {
      for (size_t next = at + 1; at < runs[run].end && next < runs[run].end; next = at + 1) {
        while (next < runs[run].end && queue.taken(next)) ++next;
        if (next == runs[run].end || !passed_over(at)) break;
        out_.order.push_back(jobs[at].job_id);
        considered[queue.shape_of(at)] += 1;
        at = next;
      }
    }
    if (at == runs[run].end) return;
    const PendingJob& head = jobs[at];
    turns.push({Share(tenants_[tenant_of[run]]), head.submit_ms, head.job_id, run, at});
  };
  auto stop_here = [&](bool before_any, int priority) {
    QueueStop stop{before_any, priority, {}, std::move(unplaceable), false, {}};
    stop.reservations_made = reservations_ >= opt_.max_reservations;
    if (!stop.reservations_made) {
      for (const Shape& f : failed_reserve_) {
        stop.unreservable.push_back({f.kind, f.slots, f.nodes, 0});
      }
    }
    return stop;
  };
  if (settled()) {
    out_.settled = stop_here(true, 0);
    return std::move(out_);
  }
  for (const PendingQueue::Level& level : queue.levels()) {
    for (size_t r = level.begin; r < level.end; ++r) push(r, runs[r].head);
    while (!turns.empty()) {
      const auto [share, submit, id, run, at] = turns.top();
      turns.pop();
      const PendingJob& job = jobs[at];
      const size_t placed = out_.placements.size(), failed = failed_reserve_.size();
      const int reserved = reservations_;
      const size_t placed_failures = failed_place_.size();
      Consider(job);
      if (queue.shape_of(at) >= 0) considered[queue.shape_of(at)] += 1;
      ++since_check;
      if (out_.placements.size() != placed || reservations_ != reserved ||
          failed_reserve_.size() != failed) {
        settled_checked = false;
      }
      if (out_.placements.size() != placed || reservations_ != reserved ||
          failed_reserve_.size() != failed || failed_place_.size() != placed_failures) {
        ++changes;
      }
      push(run, at + 1);
      if (settled()) {
        // The turns left are one per tenant of this priority with jobs not yet considered.
        QueueStop stop = stop_here(false, job.priority);
        for (; !turns.empty(); turns.pop()) {
          stop.tenants_left.push_back(jobs[std::get<4>(turns.top())].tenant_id);
        }
        out_.settled = std::move(stop);
        return std::move(out_);
      }
    }
  }
  return std::move(out_);
}

}  // namespace controlplane::service::sched_internal
