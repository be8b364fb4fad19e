#include "controlplane/service/scheduler.h"

#include <algorithm>

namespace controlplane::service {

namespace {
int& FreeOf(NodeCapacity& n, const std::string& slot_type) {
  return slot_type == "gpu" ? n.free_gpu : n.free_cpu;
}
}  // namespace

ScheduleDecision Schedule(std::vector<PendingJob> jobs, std::vector<NodeCapacity> nodes) {
  std::stable_sort(jobs.begin(), jobs.end(), [](const PendingJob& a, const PendingJob& b) {
    if (a.priority != b.priority) return a.priority > b.priority;
    if (a.created_ms != b.created_ms) return a.created_ms < b.created_ms;
    return a.job_id < b.job_id;
  });
  ScheduleDecision out;
  for (const PendingJob& job : jobs) {
    const api::Resources& r = job.resources;
    const int need = r.SlotsPerNode();
    std::vector<NodeCapacity*> fit;
    for (NodeCapacity& n : nodes) {
      if (FreeOf(n, r.slot_type) >= need) fit.push_back(&n);
    }
    if (static_cast<int>(fit.size()) < r.nodes) {
      out.waiting[job.job_id] = "waiting for " + std::to_string(r.nodes) + " nodes with " +
                                std::to_string(need) + " free " + r.slot_type +
                                " slots each (" + std::to_string(fit.size()) + " fit)";
      continue;
    }
    std::stable_sort(fit.begin(), fit.end(), [&](NodeCapacity* a, NodeCapacity* b) {
      int fa = FreeOf(*a, r.slot_type), fb = FreeOf(*b, r.slot_type);
      if (fa != fb) return fa < fb;
      return a->node_id < b->node_id;
    });
    Placement p{job.job_id, r.slot_type, {}};
    for (int i = 0; i < r.nodes; ++i) {
      FreeOf(*fit[i], r.slot_type) -= need;
      p.nodes.push_back({fit[i]->node_id, r.ranks_per_node, need});
    }
    out.placements.push_back(std::move(p));
  }
  return out;
}

std::vector<NodeCapacity> FreeCapacity(const std::vector<NodeRecord>& nodes,
                                       const std::vector<AllocationRecord>& allocations) {
  std::vector<NodeCapacity> out;
  for (const NodeRecord& n : nodes) {
    if (n.state != "UP" || n.draining) continue;  // a draining node takes no new jobs
    NodeCapacity c{n.id, n.name, n.cpu_slots,
                   n.gpus.is_array() ? static_cast<int>(n.gpus.size()) : 0};
    for (const AllocationRecord& a : allocations) {
      if (a.node_id == n.id) FreeOf(c, a.slot_type) -= a.slots;
    }
    out.push_back(c);
  }
  return out;
}

int SlotsUsed(int64_t node_id, const std::vector<AllocationRecord>& allocations) {
  int used = 0;
  for (const AllocationRecord& a : allocations) {
    if (a.node_id == node_id) used += a.slots;
  }
  return used;
}

}  // namespace controlplane::service
