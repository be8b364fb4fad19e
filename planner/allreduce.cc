#include "planner/allreduce.h"

#include <algorithm>
#include <cmath>

namespace planner {

const char* AllreduceAlgorithmName(AllreduceAlgorithm a) {
  switch (a) {
    case AllreduceAlgorithm::kRing: return "ring";
    case AllreduceAlgorithm::kRecursiveDoubling: return "recursive_doubling";
    case AllreduceAlgorithm::kHierarchical: return "hierarchical";
  }
  return "ring";
}

common::Result<AllreduceAlgorithm> ParseAllreduceAlgorithm(const std::string& name) {
  if (name == "ring") return AllreduceAlgorithm::kRing;
  if (name == "recursive_doubling") return AllreduceAlgorithm::kRecursiveDoubling;
  if (name == "hierarchical") return AllreduceAlgorithm::kHierarchical;
  return common::InvalidArgument("must be one of ring, recursive_doubling, hierarchical");
}

double RingAllreduceSeconds(double n_bytes, int p, const Link& link) {
  if (p <= 1) return 0.0;
  const double steps = 2.0 * (p - 1);
  return steps / p * n_bytes / link.bytes_per_s + steps * link.latency_s;
}

double RecursiveDoublingSeconds(double n_bytes, int p, const Link& link) {
  if (p <= 1) return 0.0;
  int rounds = 0;
  while ((1 << (rounds + 1)) <= p) ++rounds;  // ⌊log2 p⌋
  if ((1 << rounds) != p) rounds += 2;         // fold in, hand back
  return rounds * (link.latency_s + n_bytes / link.bytes_per_s);
}

double HierarchicalSeconds(double n_bytes, int nodes, int per_node, const Link& intra,
                           const Link& inter) {
  double t = 0.0;
  if (per_node > 1) {
    const double g = per_node;
    // Reduce-scatter and all-gather: each half of a ring all-reduce.
    t += 2.0 * ((g - 1) / g * n_bytes / intra.bytes_per_s + (g - 1) * intra.latency_s);
  }
  return t + RingAllreduceSeconds(n_bytes / std::max(per_node, 1), nodes, inter);
}

double AllreduceSeconds(AllreduceAlgorithm algorithm, double n_bytes, int ranks, int per_node,
                        const Link& intra, const Link& inter) {
  per_node = std::clamp(per_node, 1, std::max(ranks, 1));
  const int nodes = (ranks + per_node - 1) / per_node;
  // One level only: every pair talks over the same kind of link.
  const Link& flat = nodes > 1 ? inter : intra;
  switch (algorithm) {
    case AllreduceAlgorithm::kRing: return RingAllreduceSeconds(n_bytes, ranks, flat);
    case AllreduceAlgorithm::kRecursiveDoubling:
      return RecursiveDoublingSeconds(n_bytes, ranks, flat);
    case AllreduceAlgorithm::kHierarchical:
      return HierarchicalSeconds(n_bytes, nodes, per_node, intra, inter);
  }
  return 0.0;
}

}  // namespace planner
