// Alpha-beta cost of an all-reduce of n bytes over p ranks: the communication half of the
// planner's step model (planner/step_model.h).
//
// A message of m bytes between two ranks costs α + m·β (α: latency in seconds, β: seconds per
// byte, the inverse of the link's bandwidth). Reduction arithmetic is not charged: on a GPU it
// runs far above the link rate, and on this machine the calibration folds it into β. The
// formulas are the textbook ones (Thakur, Rabenseifner and Gropp 2005); tests check them against
// their closed forms.
#pragma once

#include <string>

#include "common/status.h"

namespace planner {

struct Link {
  double latency_s = 0.0;        // α
  double bytes_per_s = 1.0;      // 1/β, per rank (a rail NIC per GPU, or a shared-memory copy)
};

enum class AllreduceAlgorithm { kRing, kRecursiveDoubling, kHierarchical };
const char* AllreduceAlgorithmName(AllreduceAlgorithm a);
common::Result<AllreduceAlgorithm> ParseAllreduceAlgorithm(const std::string& name);

// Ring (reduce-scatter then all-gather): 2(p−1)/p · n·β + 2(p−1)·α. Zero for p == 1.
double RingAllreduceSeconds(double n_bytes, int p, const Link& link);

// Recursive doubling (every round exchanges the whole buffer): ⌈log2 p⌉ · (α + n·β) for p a
// power of two; otherwise the ranks past the largest power of two fold in first and receive the
// result last, two more full exchanges. Latency-optimal, bandwidth-poor: it wins for small n.
double RecursiveDoublingSeconds(double n_bytes, int p, const Link& link);

// Hierarchical, p = nodes × per_node ranks: reduce-scatter over the node's ring (intra link),
// each rank all-reduces its 1/per_node shard with its peers on the other nodes over its own NIC
// (inter link, ring), then all-gather in the node:
//   2 · ((g−1)/g · n·β_intra + (g−1)·α_intra) + RingAllreduce(n/g, nodes, inter).
double HierarchicalSeconds(double n_bytes, int nodes, int per_node, const Link& intra,
                           const Link& inter);

// The all-reduce of n bytes on `ranks` ranks placed per_node to a node: one node (or per_node 1)
// uses the intra link alone (ring or recursive doubling) or the inter link alone, hierarchical
// falls back to a ring over the one level that exists.
double AllreduceSeconds(AllreduceAlgorithm algorithm, double n_bytes, int ranks, int per_node,
                        const Link& intra, const Link& inter);

}  // namespace planner
