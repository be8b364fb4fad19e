// Short builders for the scheduler's inputs, shared by its tests and its benchmark.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "controlplane/service/scheduler.h"

namespace controlplane::testing {

using service::NodeShare;
using service::PendingJob;
using service::RunningJob;
using service::SchedNode;
using service::SchedTenant;

inline constexpr int64_t kNowMs = 1'000'000'000;  // the tests' "now"

// A node with every slot free.
inline SchedNode Node(int64_t id, int cpu, int gpu = 0) {
  return {id, "node-" + std::to_string(id), cpu, gpu, cpu, gpu, false};
}

struct JobArgs {
  int64_t tenant = 1;
  int nodes = 1;
  int ranks_per_node = 1;
  int slots_per_rank = 1;
  std::string slot_type = "cpu";
  int priority = 50;
  int64_t limit_s = 0;
  int64_t submit_ms = 0;  // 0: the id, so lower ids are older
};

inline PendingJob Job(int64_t id, JobArgs a = {}) {
  PendingJob j;
  j.job_id = id;
  j.tenant_id = a.tenant;
  j.priority = a.priority;
  j.submit_ms = a.submit_ms == 0 ? id : a.submit_ms;
  j.resources.nodes = a.nodes;
  j.resources.ranks_per_node = a.ranks_per_node;
  j.resources.slots_per_rank = a.slots_per_rank;
  j.resources.slot_type = a.slot_type;
  j.time_limit_seconds = a.limit_s;
  return j;
}

// A running job holding `slots` of `slot_type` on each of `nodes`, started `age_s` before now.
// Takes its slots off the nodes in `cluster`.
inline RunningJob Running(std::vector<SchedNode>& cluster, int64_t id, std::vector<int64_t> nodes,
                          int slots, int priority = 0, int64_t age_s = 0, int64_t limit_s = 0,
                          int64_t tenant = 1, const std::string& slot_type = "cpu") {
  RunningJob r;
  r.job_id = id;
  r.tenant_id = tenant;
  r.priority = priority;
  r.start_ms = kNowMs - age_s * 1000;
  r.time_limit_seconds = limit_s;
  r.slot_type = slot_type;
  for (int64_t n : nodes) {
    r.nodes.push_back({n, 1, slots});
    for (SchedNode& c : cluster) {
      if (c.id == n) (slot_type == "gpu" ? c.free_gpu : c.free_cpu) -= slots;
    }
  }
  return r;
}

inline SchedTenant Tenant(int64_t id, double weight = 1) {
  SchedTenant t;
  t.id = id;
  t.name = "tenant-" + std::to_string(id);
  t.weight = weight;
  return t;
}

// For the randomised tests: a number in [lo, hi], and one of `values`.
inline int Between(std::mt19937_64& rng, int lo, int hi) {
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}

inline int Pick(std::mt19937_64& rng, std::initializer_list<int> values) {
  std::vector<int> v(values);
  return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
}

}  // namespace controlplane::testing
