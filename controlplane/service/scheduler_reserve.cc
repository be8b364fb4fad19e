// Reservations and preemptions for jobs that cannot start now (scheduler.h states the rules;
// scheduler_cycle.h the model they work on).
#include <algorithm>
#include <cstdio>
#include <tuple>

#include "common/time_util.h"
#include "controlplane/service/scheduler_cycle.h"

namespace controlplane::service::sched_internal {

namespace {

bool Dominated(const std::vector<Shape>& failed, int kind, int slots, int nodes, int priority,
               int64_t tenant = 0) {
  for (const Shape& f : failed) {
    if (f.kind == kind && f.slots <= slots && f.nodes <= nodes && f.priority >= priority &&
        f.tenant == tenant) {
      return true;
    }
  }
  return false;
}

std::string JoinIds(const std::vector<int64_t>& ids) {
  std::string s;
  for (int64_t id : ids) s += (s.empty() ? "" : ", ") + std::to_string(id);
  return s;
}

}  // namespace

void Cycle::Hold(const PendingJob& job, const std::vector<int>& lanes, int64_t start) {
  Reservation res{job.job_id, {}, start};
  for (int lane : lanes) {
    StepLane(lane, start, -job.resources.SlotsPerNode());
    res.node_ids.push_back(NodeIdOfLane(lane));
  }
  out_.reservations.push_back(std::move(res));
  reservations_ += 1;
}

bool Cycle::TryReserve(const PendingJob& job, int kind, std::string* reason) {
  const api::Resources& r = job.resources;
  const int slots = r.SlotsPerNode();
  static const std::string cannot =
      "; no reservation: too few nodes are expected to free up (jobs without a time limit, or "
      "reserved for jobs ahead)";
  if (Dominated(failed_reserve_, kind, slots, r.nodes, 0)) {
    if (Explains(job.job_id)) *reason = cannot;
    return false;
  }
  // The nodes that have room for good soonest (ties: the lower node id).
  const std::vector<ReadyIndex::Entry>& ready = ReadyIndexOf(kind, slots).by_time;
  if (static_cast<int>(ready.size()) < r.nodes) {
    if (failed_reserve_.size() < 64) failed_reserve_.push_back({kind, slots, r.nodes, 0, 0});
    if (Explains(job.job_id)) *reason = cannot;
    return false;
  }
  const int64_t start = ready[r.nodes - 1].ready;
  std::vector<int> lanes;
  lanes.reserve(r.nodes);
  for (int i = 0; i < r.nodes; ++i) lanes.push_back(ready[i].lane);
  Hold(job, lanes, start);
  if (Explains(job.job_id)) {  // reasons are all this string is for
    *reason = WaitReason(job, kind, EndOf(now_, job.time_limit_seconds)) + "; reserved " +
              std::to_string(r.nodes) + " nodes from " + common::FormatTimeMillis(start);
  }
  return true;
}

const ReadyIndex& Cycle::ReadyIndexOf(int kind, int slots) {
  auto sooner = [](const ReadyIndex::Entry& a, const ReadyIndex::Entry& b) {
    return std::tie(a.ready, a.node_id, a.lane) < std::tie(b.ready, b.node_id, b.lane);
  };
  auto found = std::find_if(ready_index_.begin(), ready_index_.end(), [&](const ReadyIndex& x) {
    return x.kind == kind && x.slots == slots;
  });
  if (found == ready_index_.end()) {
    ReadyIndex& index = ready_index_.emplace_back();
    index.kind = kind;
    index.slots = slots;
    index.seen = touched_.size();
    index.by_time.reserve(usable_[kind].size());
    for (int lane : usable_[kind]) {
      const int64_t t = lanes_[lane].ReadyTime(slots, now_);
      if (t != kForever) index.by_time.push_back({t, NodeIdOfLane(lane), lane});
    }
    std::sort(index.by_time.begin(), index.by_time.end(), sooner);
    return index;
  }
  ReadyIndex& index = *found;
  std::vector<ReadyIndex::Entry>& by_time = index.by_time;
  for (; index.seen < touched_.size(); ++index.seen) {
    const int lane = touched_[index.seen];
    if (lane % kSlotKinds != kind || !lane_usable_[lane]) continue;
    const ReadyIndex::Entry entry{lanes_[lane].ReadyTime(slots, now_), NodeIdOfLane(lane), lane};
    auto old = std::find_if(by_time.begin(), by_time.end(),
                            [&](const ReadyIndex::Entry& e) { return e.lane == lane; });
    if (old == by_time.end() || entry.ready == kForever) {
      if (old != by_time.end()) by_time.erase(old);
      if (entry.ready != kForever) {
        by_time.insert(std::upper_bound(by_time.begin(), by_time.end(), entry, sooner), entry);
      }
      continue;
    }
    // Moved within the order: shift only the entries between its old place and its new one.
    auto at = std::upper_bound(by_time.begin(), by_time.end(), entry, sooner);
    if (at > old) {
      std::rotate(old, old + 1, at);
      *(at - 1) = entry;
    } else {
      std::rotate(at, old, old + 1);
      *at = entry;
    }
  }
  return index;
}

bool Cycle::TryPreempt(const PendingJob& job, int kind, std::string* reason) {
  const api::Resources& r = job.resources;
  const int slots = r.SlotsPerNode();
  if (Dominated(failed_preempt_, kind, slots, r.nodes, job.priority, job.tenant_id)) return false;
  // Victims are expected gone by `deadline`; a lane is ready when it has room for good by then.
  const int64_t deadline = now_ + std::max<int64_t>(opt_.preempt_grace_ms, 1);
  std::vector<char> usable(lanes_.size(), 0), ready(lanes_.size(), 0);
  int64_t ready_count = 0;
  auto refresh = [&](int lane) {
    if (!usable[lane]) return;
    const bool now_ready = lanes_[lane].ReadyTime(slots, now_) <= deadline;
    if (now_ready != static_cast<bool>(ready[lane])) {
      ready_count += now_ready ? 1 : -1;
      ready[lane] = now_ready;
    }
  };
  for (int lane : usable_[kind]) usable[lane] = 1;
  for (int lane : usable_[kind]) refresh(lane);

  // Another tenant's jobs are victims only while that tenant's share is at least this tenant's
  // once the job is placed (scheduler.h).
  const TenantRun& mine = tenants_[TenantIndex(job.tenant_id)];
  SlotCounts held_after = mine.held;
  held_after[kind] += static_cast<int64_t>(slots) * r.nodes;
  const double share_after = DominantShare(mine.t.usage, held_after, cluster_usage_, mine.t.weight);
  auto may_preempt = [&](const RunningJob& v) {
    return v.tenant_id == job.tenant_id ||
           Share(tenants_[TenantIndex(v.tenant_id)]) >= share_after;
  };
  std::vector<int> candidates;
  for (size_t i = 0; i < running_.size(); ++i) {
    const RunRecord& v = running_[i];
    if (v.victim || v.job->preempting || v.kind != kind || v.job->priority >= job.priority ||
        v.release <= deadline) {
      continue;
    }
    if (!may_preempt(*v.job)) continue;
    if (std::any_of(v.lanes.begin(), v.lanes.end(), [&](auto& l) { return usable[l.first]; })) {
      candidates.push_back(static_cast<int>(i));
    }
  }
  // Lowest priority first, then the youngest (it loses the least work).
  std::sort(candidates.begin(), candidates.end(), [&](int a, int b) {
    const RunningJob &x = *running_[a].job, &y = *running_[b].job;
    return std::tuple(x.priority, -x.start_ms, -x.job_id) <
           std::tuple(y.priority, -y.start_ms, -y.job_id);
  });
  // Preempting a victim moves its release to the deadline (and back when undone).
  auto preempt = [&](int i, bool on) {
    const RunRecord& v = running_[i];
    for (const auto& [lane, s] : v.lanes) {
      if (v.release != kForever) StepLane(lane, v.release, on ? -s : s);
      StepLane(lane, deadline, on ? s : -s);
      refresh(lane);
    }
  };
  std::vector<int> chosen;
  for (size_t c = 0; c < candidates.size() && ready_count < r.nodes; ++c) {
    preempt(candidates[c], true);
    chosen.push_back(candidates[c]);
  }
  if (ready_count < r.nodes) {
    for (auto it = chosen.rbegin(); it != chosen.rend(); ++it) preempt(*it, false);
    if (failed_preempt_.size() < 64) {
      failed_preempt_.push_back({kind, slots, r.nodes, 0, job.priority, job.tenant_id});
    }
    return false;
  }
  // The fewest: spare every victim the job can do without, the most valuable first.
  for (size_t c = chosen.size(); c-- > 0;) {
    preempt(chosen[c], false);
    if (ready_count < r.nodes) {
      preempt(chosen[c], true);
    } else {
      chosen.erase(chosen.begin() + static_cast<std::ptrdiff_t>(c));
    }
  }
  std::vector<std::pair<int64_t, int>> pick;  // (ready time, lane)
  for (int lane : usable_[kind]) {
    if (ready[lane]) pick.push_back({lanes_[lane].ReadyTime(slots, now_), lane});
  }
  std::sort(pick.begin(), pick.end(), [&](const auto& a, const auto& b) {
    return std::tuple(a.first, NodeIdOfLane(a.second)) < std::tuple(b.first, NodeIdOfLane(b.second));
  });
  pick.resize(r.nodes);
  std::vector<int> lanes;
  std::vector<char> picked(lanes_.size(), 0);
  for (const auto& [t, lane] : pick) {
    lanes.push_back(lane);
    picked[lane] = 1;
  }
  Hold(job, lanes, pick.back().first);

  std::vector<int64_t> victims, leaving;
  for (int c : chosen) {
    running_[c].victim = true;
    running_[c].release = deadline;
    victims.push_back(running_[c].job->job_id);
  }
  std::sort(victims.begin(), victims.end());
  leaving = victims;
  for (const RunRecord& v : running_) {  // told to leave by an earlier cycle, on these nodes
    if (!v.job->preempting || v.kind != kind) continue;
    if (std::any_of(v.lanes.begin(), v.lanes.end(), [&](auto& l) { return picked[l.first]; })) {
      leaving.push_back(v.job->job_id);
    }
  }
  std::sort(leaving.begin(), leaving.end());
  if (!victims.empty()) {
    // Why each victim may go, for its job event: written for the victims only.
    std::map<int64_t, std::string> reasons;
    for (int c : chosen) {
      const RunningJob& v = *running_[c].job;
      std::string why = "priority " + std::to_string(v.priority) + " below " +
                        std::to_string(job.priority);
      if (v.tenant_id == job.tenant_id) {
        why += ", same tenant";
      } else {
        char shares[160];
        std::snprintf(shares, sizeof shares,
                      ", tenant %lld above its fair share (share %.3f, tenant %lld's %.3f after)",
                      static_cast<long long>(v.tenant_id), Share(tenants_[TenantIndex(v.tenant_id)]),
                      static_cast<long long>(job.tenant_id), share_after);
        why += shares;
      }
      reasons[v.job_id] = std::move(why);
    }
    out_.preemptions.push_back({job.job_id, victims, std::move(reasons)});
    ForgetFailures();  // slots come back sooner than the failures assumed
  }
  if (leaving.empty()) {
    *reason = WaitReason(job, kind, EndOf(now_, job.time_limit_seconds)) + "; reserved " +
              std::to_string(r.nodes) + " nodes from " +
              common::FormatTimeMillis(pick.back().first);
  } else {
    *reason = "preempting jobs " + JoinIds(leaving);
  }
  return true;
}

}  // namespace controlplane::service::sched_internal
