#include "controlplane/service/scheduler.h"

#include <unordered_map>

#include "controlplane/service/scheduler_cycle.h"

namespace controlplane::service {

ScheduleDecision Schedule(const ClusterSnapshot& snapshot, const ScheduleOptions& options) {
  return sched_internal::Cycle(snapshot, options).Run();
}

ScheduleDecision ScheduleQueue(const ClusterSnapshot& snapshot, const PendingQueue& queue,
                               const ScheduleOptions& options) {
  return sched_internal::Cycle(snapshot, options).RunQueue(queue);
}

bool AsksNoMore(const JobShape& a, const JobShape& b) {
  const auto [ka, sa, na, la] = a;
  const auto [kb, sb, nb, lb] = b;
  return ka == kb && sa <= sb && na <= nb && (lb == 0 || (la != 0 && la <= lb));
}

NodeSizes RegisteredSizes(const ClusterSnapshot& snapshot) {
  if (snapshot.registered) return NodeSizes(*snapshot.registered);
  std::vector<NodeShape> shapes;
  for (const SchedNode& n : snapshot.nodes) shapes.push_back({n.total_cpu, n.total_gpu, 1});
  return NodeSizes(shapes);
}

std::vector<SchedNode> SchedNodes(const std::vector<NodeRecord>& nodes,
                                  const std::vector<AllocationRecord>& allocations) {
  std::unordered_map<int64_t, size_t> index;
  std::vector<SchedNode> out;
  for (const NodeRecord& n : nodes) {
    if (n.state != "UP") continue;
    const int gpus = n.gpus.is_array() ? static_cast<int>(n.gpus.size()) : 0;
    index[n.id] = out.size();
    out.push_back({n.id, n.name, n.cpu_slots, gpus, n.cpu_slots, gpus, n.draining});
  }
  for (const AllocationRecord& a : allocations) {
    auto it = index.find(a.node_id);
    if (it == index.end()) continue;
    SchedNode& n = out[it->second];
    (a.slot_type == "gpu" ? n.free_gpu : n.free_cpu) -= a.slots;
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
