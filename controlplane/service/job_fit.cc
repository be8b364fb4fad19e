#include "controlplane/service/job_fit.h"

#include <algorithm>
#include <map>

namespace controlplane::service {

TenantLimits LimitsOf(const Quota& quota) {
  TenantLimits l;
  if (quota.slots) l.slots = *quota.slots;
  if (quota.running_jobs) l.running_jobs = *quota.running_jobs;
  if (quota.nodes_per_job) l.nodes_per_job = *quota.nodes_per_job;
  return l;
}

std::vector<NodeShape> NodeShapesOf(const std::vector<NodeRecord>& nodes) {
  std::map<std::pair<int, int>, int64_t> count;
  for (const NodeRecord& n : nodes) {
    const int gpus = n.gpus.is_array() ? static_cast<int>(n.gpus.size()) : 0;
    count[{n.cpu_slots, gpus}] += 1;
  }
  std::vector<NodeShape> out;
  for (const auto& [size, n] : count) out.push_back({size.first, size.second, n});
  return out;
}

NodeSizes::NodeSizes(const std::vector<NodeShape>& shapes) {
  for (int kind = 0; kind < kSlotKinds; ++kind) {
    std::map<int, int64_t> by_slots;
    for (const NodeShape& s : shapes) {
      by_slots[kind == kGpuSlots ? s.gpus : s.cpu_slots] += s.count;
    }
    int64_t at_least = 0;
    auto& v = at_least_[kind];
    for (auto it = by_slots.rbegin(); it != by_slots.rend(); ++it) {
      at_least += it->second;
      v.push_back({it->first, at_least});
    }
    std::reverse(v.begin(), v.end());
  }
  for (const NodeShape& s : shapes) nodes_ += s.count;
}

int64_t NodeSizes::CountAtLeast(int kind, int slots) const {
  if (kind < 0 || kind >= kSlotKinds) return 0;
  const auto& v = at_least_[kind];
  auto it = std::lower_bound(v.begin(), v.end(), slots,
                             [](const std::pair<int, int64_t>& e, int s) { return e.first < s; });
  return it == v.end() ? 0 : it->second;
}

std::optional<NeverFits> WhyNeverFits(const api::Resources& r, const TenantLimits& limits,
                                      const NodeSizes& nodes) {
  const int kind = SlotKindOf(r.slot_type);
  if (kind < 0) {
    return NeverFits{"never fits: unknown slot type \"" + r.slot_type + "\"",
                     "resources.slot_type"};
  }
  if (r.nodes < 1 || r.ranks_per_node < 1 || r.slots_per_rank < 1) {
    return NeverFits{"never fits: asks for no slots", "resources"};
  }
  if (limits.nodes_per_job && r.nodes > *limits.nodes_per_job) {
    return NeverFits{"never fits: asks for " + std::to_string(r.nodes) +
                         " nodes, the tenant's quota allows " +
                         std::to_string(*limits.nodes_per_job) + " nodes per job",
                     "resources.nodes"};
  }
  const int per_node = r.SlotsPerNode();
  const int64_t slots = static_cast<int64_t>(r.nodes) * per_node;
  if (limits.slots && slots > *limits.slots) {
    return NeverFits{"never fits: needs " + std::to_string(slots) + " " + r.slot_type +
                         " slots, the tenant's quota allows " + std::to_string(*limits.slots),
                     "resources"};
  }
  if (limits.running_jobs && *limits.running_jobs <= 0) {
    return NeverFits{"never fits: the tenant's quota allows no running jobs", "resources"};
  }
  const int64_t have = nodes.CountAtLeast(kind, per_node);
  if (have < r.nodes) {
    return NeverFits{"never fits: needs " + std::to_string(r.nodes) + " nodes with " +
                         std::to_string(per_node) + " " + r.slot_type +
                         " slots each; the cluster has " + std::to_string(have) +
                         " such nodes of " + std::to_string(nodes.nodes()),
                     "resources"};
  }
  return std::nullopt;
}

}  // namespace controlplane::service
