// One scheduling cycle: the model built from the snapshot, the order jobs are considered in,
// quotas, and placement with backfill. Reservations and preemptions: scheduler_reserve.cc.
#include <algorithm>
#include <functional>
#include <queue>
#include <tuple>

#include "controlplane/service/scheduler_cycle.h"

namespace controlplane::service::sched_internal {

Cycle::Cycle(const ClusterSnapshot& in, const ScheduleOptions& opt)
    : in_(in), opt_(opt), now_(in.now_ms), registered_(RegisteredSizes(in)) {
  // (node id, index), by id: a node's index for the running jobs' shares below.
  std::vector<std::pair<int64_t, int>> node_index;
  node_index.reserve(in.nodes.size());
  lanes_.reserve(in.nodes.size() * kSlotKinds);
  lane_usable_.assign(in.nodes.size() * kSlotKinds, 0);
  std::array<int, kSlotKinds> most{0, 0};  // slots of the largest node, per kind
  for (const SchedNode& n : in.nodes) {
    most[kCpuSlots] = std::max(most[kCpuSlots], n.total_cpu);
    most[kGpuSlots] = std::max(most[kGpuSlots], n.total_gpu);
  }
  for (int k = 0; k < kSlotKinds; ++k) free_hist_[k].assign(most[k] + 1, 0);
  for (size_t i = 0; i < in.nodes.size(); ++i) {
    const SchedNode& n = in.nodes[i];
    node_index.push_back({n.id, static_cast<int>(i)});
    const std::array<int, kSlotKinds> total{n.total_cpu, n.total_gpu};
    const std::array<int, kSlotKinds> free{n.free_cpu, n.free_gpu};
    for (int k = 0; k < kSlotKinds; ++k) {
      if (total[k] <= 0) {
        lanes_.emplace_back(0);
        continue;
      }
      const int lane = static_cast<int>(i) * kSlotKinds + k;
      const int f = std::clamp(free[k], 0, total[k]);
      lanes_.emplace_back(f);
      cluster_total_[k] += total[k];
      if (n.draining) continue;
      usable_[k].push_back(lane);
      lane_usable_[lane] = 1;
      free_hist_[k][f] += 1;
    }
  }
  if (!std::is_sorted(node_index.begin(), node_index.end())) {
    std::sort(node_index.begin(), node_index.end());
  }
  // Node ids are usually dense: then a node's index is read off a table, not searched for.
  std::vector<int> dense_index;
  const int64_t lowest_id = node_index.empty() ? 0 : node_index.front().first;
  const uint64_t id_span = node_index.empty() ? 0
                                              : static_cast<uint64_t>(node_index.back().first) -
                                                    static_cast<uint64_t>(lowest_id);
  if (!node_index.empty() && id_span < 4 * node_index.size() + 64) {
    dense_index.assign(id_span + 1, -1);
    for (const auto& [id, index] : node_index) {  // a repeated id: its first node, as a search
      if (dense_index[id - lowest_id] < 0) dense_index[id - lowest_id] = index;
    }
  }
  auto index_of = [&](int64_t node_id) {
    if (!dense_index.empty()) {
      const int64_t at = node_id - lowest_id;
      return at < 0 || at >= static_cast<int64_t>(dense_index.size()) ? -1 : dense_index[at];
    }
    auto it = std::lower_bound(node_index.begin(), node_index.end(),
                               std::pair<int64_t, int>(node_id, -1));
    return it == node_index.end() || it->first != node_id ? -1 : it->second;
  };
  for (const SchedTenant& t : in.tenants) {
    tenant_index_[t.id] = static_cast<int>(tenants_.size());
    tenants_.push_back({t, {}});
  }
  // A job told to leave is expected gone a grace period from now; an overdue one, at once.
  const int64_t preempted_gone = now_ + std::max<int64_t>(opt.preempt_grace_ms, 1);
  running_.reserve(in.running.size());
  for (const RunningJob& j : in.running) {
    RunRecord r;
    r.job = &j;
    r.kind = SlotKindOf(j.slot_type);
    if (r.kind < 0) continue;
    r.release = EndOf(j.start_ms, j.time_limit_seconds);
    if (r.release != kForever) r.release = std::max(r.release, now_ + 1);
    if (j.preempting) r.release = std::min(r.release, preempted_gone);
    TenantRun& tenant = tenants_[TenantIndex(j.tenant_id)];
    for (const NodeShare& s : j.nodes) {
      tenant.held[r.kind] += s.slots;
      const int index = index_of(s.node_id);
      if (index < 0) continue;  // no longer in the cluster
      const int lane = index * kSlotKinds + r.kind;
      r.lanes.push_back({lane, s.slots});
      if (r.release != kForever) lanes_[lane].Step(r.release, s.slots);
    }
    running_.push_back(std::move(r));
  }
}

int Cycle::TenantIndex(int64_t tenant_id) {
  auto [it, added] = tenant_index_.try_emplace(tenant_id, static_cast<int>(tenants_.size()));
  if (added) {
    SchedTenant t;
    t.id = tenant_id;
    tenants_.push_back({t, {}});
  }
  return it->second;
}

double Cycle::Share(const TenantRun& t) const {
  return DominantShare(t.t.usage, t.held, cluster_usage_, t.t.weight);
}

ScheduleDecision Cycle::Run() {
  // Every share of this cycle is measured against the cluster's usage as the cycle starts.
  std::vector<TenantUsage> usage;
  usage.reserve(tenants_.size());
  for (const TenantRun& t : tenants_) usage.push_back({t.t.usage, t.held});
  cluster_usage_ = ClusterUsage(usage, cluster_total_);
  // Sorted by priority, then tenant, then age: each tenant's jobs of one priority are a run.
  std::vector<std::pair<int, const PendingJob*>> queue;  // (tenant index, job)
  queue.reserve(in_.pending.size());
  for (const PendingJob& j : in_.pending) queue.push_back({TenantIndex(j.tenant_id), &j});
  std::sort(queue.begin(), queue.end(), [](const auto& a, const auto& b) {
    const PendingJob &x = *a.second, &y = *b.second;
    return std::tuple(-x.priority, a.first, x.submit_ms, x.job_id) <
           std::tuple(-y.priority, b.first, y.submit_ms, y.job_id);
  });
  auto same_run = [&](size_t i, size_t j) {
    return queue[i].first == queue[j].first &&
           queue[i].second->priority == queue[j].second->priority;
  };
  std::vector<size_t> run_end(queue.size());
  for (size_t i = queue.size(); i-- > 0;) {
    run_end[i] = i + 1 < queue.size() && same_run(i, i + 1) ? run_end[i + 1] : i + 1;
  }
  // Within one priority the tenant whose share is lowest goes next; its share grows with every
  // job placed, so tenants interleave in proportion to their weights.
  using Turn = std::tuple<double, int64_t, int64_t, size_t>;  // share, head's submit, id, where
  std::priority_queue<Turn, std::vector<Turn>, std::greater<Turn>> turns;
  auto push = [&](size_t at) {
    const PendingJob& head = *queue[at].second;
    turns.push({Share(tenants_[queue[at].first]), head.submit_ms, head.job_id, at});
  };
  out_.order.reserve(queue.size());
  for (size_t level = 0; level < queue.size();) {
    size_t next = level;
    while (next < queue.size() && queue[next].second->priority == queue[level].second->priority) {
      push(next);
      next = run_end[next];
    }
    while (!turns.empty()) {
      const size_t at = std::get<3>(turns.top());
      turns.pop();
      Consider(*queue[at].second);
      if (at + 1 < run_end[at]) push(at + 1);
    }
    level = next;
  }
  return std::move(out_);
}

void Cycle::Consider(const PendingJob& job) {
  out_.order.push_back(job.job_id);
  TenantRun& tenant = tenants_[TenantIndex(job.tenant_id)];
  const TenantLimits& limits = tenant.t.limits;
  if (auto why = WhyNeverFits(job.resources, limits, registered_)) {
    if (Explains(job.job_id)) out_.waiting[job.job_id] = std::move(why->reason);
    return;
  }
  const int kind = SlotKindOf(job.resources.slot_type);
  const int64_t slots = static_cast<int64_t>(job.resources.nodes) * job.resources.SlotsPerNode();
  if (limits.slots && tenant.t.slots_in_use + slots > *limits.slots) {
    if (!Explains(job.job_id)) return;
    std::string why = "tenant quota: slots " + std::to_string(tenant.t.slots_in_use) + "/" +
                      std::to_string(*limits.slots);
    if (tenant.t.slots_in_use < *limits.slots) why += ", the job needs " + std::to_string(slots);
    out_.waiting[job.job_id] = std::move(why);
    return;
  }
  if (limits.running_jobs && tenant.t.running_jobs + 1 > *limits.running_jobs) {
    if (!Explains(job.job_id)) return;
    out_.waiting[job.job_id] = "tenant quota: running jobs " +
                               std::to_string(tenant.t.running_jobs) + "/" +
                               std::to_string(*limits.running_jobs);
    return;
  }
  const int64_t end = EndOf(now_, job.time_limit_seconds);
  if (TryPlace(job, tenant, kind, end)) return;
  std::string reason;
  if (reservations_ < opt_.max_reservations) {
    const bool may_preempt =
        opt_.preempt_min_priority && job.priority >= *opt_.preempt_min_priority;
    if ((may_preempt && TryPreempt(job, kind, &reason)) || TryReserve(job, kind, &reason)) {
      if (Explains(job.job_id)) out_.waiting[job.job_id] = std::move(reason);
      return;
    }
  }
  if (Explains(job.job_id)) out_.waiting[job.job_id] = WaitReason(job, kind, end) + reason;
}

int64_t Cycle::FitNow(int kind, int slots) const {
  const auto& hist = free_hist_[kind];
  int64_t n = 0;
  for (size_t f = std::max(slots, 0); f < hist.size(); ++f) n += hist[f];
  return n;
}

void Cycle::TakeNow(int lane, int slots, int64_t end) {
  const int kind = lane % kSlotKinds;
  free_hist_[kind][lanes_[lane].free_now()] -= 1;
  lanes_[lane].Take(slots, end);
  touched_.push_back(lane);
  free_hist_[kind][lanes_[lane].free_now()] += 1;
}

void Cycle::ForgetFailures() {
  failed_place_.clear();
  failed_reserve_.clear();
  failed_preempt_.clear();
}

bool Cycle::TryPlace(const PendingJob& job, TenantRun& tenant, int kind, int64_t end) {
  const api::Resources& r = job.resources;
  const int slots = r.SlotsPerNode();
  if (FitNow(kind, slots) < r.nodes) return false;
  for (const Shape& f : failed_place_) {
    if (f.kind == kind && f.slots <= slots && f.nodes <= r.nodes && f.end <= end) return false;
  }
  scratch_.clear();
  for (int lane : usable_[kind]) {
    if (lanes_[lane].CanTake(slots, end)) scratch_.push_back(lane);
  }
  if (static_cast<int>(scratch_.size()) < r.nodes) {
    if (failed_place_.size() < 64) failed_place_.push_back({kind, slots, r.nodes, end, 0});
    return false;
  }
  // Best fit: the fullest nodes that fit, so large holes stay for large jobs.
  auto fuller = [&](int a, int b) {
    const int fa = lanes_[a].free_now(), fb = lanes_[b].free_now();
    return fa != fb ? fa < fb : NodeIdOfLane(a) < NodeIdOfLane(b);
  };
  const auto chosen_end = scratch_.begin() + r.nodes;
  std::nth_element(scratch_.begin(), chosen_end - 1, scratch_.end(), fuller);
  std::sort(scratch_.begin(), chosen_end, fuller);
  Placement p{job.job_id, r.slot_type, {}};
  for (auto it = scratch_.begin(); it != chosen_end; ++it) {
    TakeNow(*it, slots, end);
    p.nodes.push_back({NodeIdOfLane(*it), r.ranks_per_node, slots});
  }
  const int64_t total = static_cast<int64_t>(slots) * r.nodes;
  tenant.t.slots_in_use += total;
  tenant.t.running_jobs += 1;
  tenant.held[kind] += total;
  out_.placements.push_back(std::move(p));
  return true;
}

std::string Cycle::WaitReason(const PendingJob& job, int kind, int64_t end) const {
  const api::Resources& r = job.resources;
  const int64_t fit = FitNow(kind, r.SlotsPerNode());
  std::string why = "waiting for " + std::to_string(r.nodes) + " nodes with " +
                    std::to_string(r.SlotsPerNode()) + " free " + r.slot_type + " slots each (" +
                    std::to_string(fit) + " fit";
  if (fit >= r.nodes) {
    why += end == kForever ? ", but a job without a time limit there would delay reserved jobs"
                           : ", but the job would run into the start of reserved jobs there";
  }
  return why + ")";
}

}  // namespace controlplane::service::sched_internal
