#include "controlplane/service/scheduler_snapshot.h"

#include <unordered_map>

namespace controlplane::service {

api::Resources ResourcesOf(const nlohmann::json& spec) {
  api::Resources r;
  // Found, not value(): value() returns a copy of the object, made for every pending job in
  // every cycle.
  static const nlohmann::json kNone = nlohmann::json::object();
  auto it = spec.is_object() ? spec.find("resources") : spec.end();
  const nlohmann::json& j = it != spec.end() && it->is_object() ? *it : kNone;
  r.nodes = j.value("nodes", 1);
  r.ranks_per_node = j.value("ranks_per_node", 1);
  r.slot_type = j.value("slot_type", "cpu");
  r.slots_per_rank = j.value("slots_per_rank", 1);
  return r;
}

int64_t TimeLimitSecondsOf(const nlohmann::json& spec) {
  return spec.value("time_limit_seconds", int64_t{0});
}

std::vector<SchedTenant> SchedTenantsOf(const std::vector<TenantRecord>& tenants,
                                        const std::map<int64_t, SlotSeconds>& usage) {
  std::vector<SchedTenant> out;
  for (const TenantRecord& r : tenants) {
    SchedTenant t;
    t.id = r.id;
    t.name = r.name;
    t.weight = r.weight;
    t.limits = LimitsOf(r.quota);
    auto u = usage.find(r.id);
    if (u != usage.end()) t.usage = u->second;
    out.push_back(std::move(t));
  }
  return out;
}

ClusterSnapshot BuildSnapshot(int64_t now_ms, const std::vector<NodeRecord>& nodes,
                              const std::vector<AllocationRecord>& allocations,
                              const std::vector<JobRecord>& jobs,
                              std::vector<SchedTenant> tenants) {
  ClusterSnapshot s;
  s.now_ms = now_ms;
  s.nodes = SchedNodes(nodes, allocations);
  s.registered = NodeShapesOf(nodes);
  std::unordered_map<int64_t, std::vector<const AllocationRecord*>> held;
  for (const AllocationRecord& a : allocations) held[a.job_id].push_back(&a);
  std::unordered_map<int64_t, size_t> tenant_index;
  for (size_t i = 0; i < tenants.size(); ++i) {
    tenant_index[tenants[i].id] = i;
    tenants[i].slots_in_use = 0;
    tenants[i].running_jobs = 0;
  }
  for (const JobRecord& j : jobs) {
    if (j.state == api::JobState::kPending) {
      s.pending.push_back({j.id, j.tenant_id, j.priority, j.created_ms, ResourcesOf(j.spec),
                           TimeLimitSecondsOf(j.spec)});
      continue;
    }
    if (j.state != api::JobState::kScheduled && j.state != api::JobState::kRunning &&
        j.state != api::JobState::kCancelling && j.state != api::JobState::kRestarting) {
      continue;
    }
    auto it = held.find(j.id);
    if (it == held.end()) continue;
    RunningJob r;
    r.job_id = j.id;
    r.tenant_id = j.tenant_id;
    r.priority = j.priority;
    r.start_ms = j.started_ms.value_or(j.updated_ms);
    r.time_limit_seconds = TimeLimitSecondsOf(j.spec);
    r.slot_type = it->second.front()->slot_type;
    // Being cancelled or preempted: told to stop already, expected gone within the grace period.
    r.preempting = j.state == api::JobState::kCancelling || j.state == api::JobState::kRestarting;
    int64_t slots = 0;
    for (const AllocationRecord* a : it->second) {
      r.nodes.push_back({a->node_id, a->ranks, a->slots});
      slots += a->slots;
    }
    auto t = tenant_index.find(j.tenant_id);
    if (t != tenant_index.end()) {
      tenants[t->second].slots_in_use += slots;
      tenants[t->second].running_jobs += 1;
    }
    s.running.push_back(std::move(r));
  }
  s.tenants = std::move(tenants);
  return s;
}

}  // namespace controlplane::service
