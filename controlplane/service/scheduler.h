// The scheduling decision as a pure function: pending jobs and free node capacity in, gang
// allocations and "why not" reasons out. No I/O, no clock; the scheduler loop feeds it from the
// database and writes its answer back in one transaction.
//
// Policy: jobs are considered by priority (higher first), then submit time, then id. A job gets
// `nodes` distinct nodes, each with ranks_per_node * slots_per_rank free slots of its slot type,
// or nothing at all (gang, all-or-nothing). A job that does not fit does not block smaller jobs
// behind it (greedy backfill, no reservations yet). Among nodes that fit, the fullest are taken
// first (best fit) to keep large holes for large jobs.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "api/job_spec.h"
#include "controlplane/service/store.h"

namespace controlplane::service {

struct NodeCapacity {
  int64_t node_id = 0;
  std::string name;
  int free_cpu = 0;  // free cpu slots
  int free_gpu = 0;  // free gpu slots
};

struct PendingJob {
  int64_t job_id = 0;
  int priority = 0;
  int64_t created_ms = 0;
  api::Resources resources;
};

struct NodeShare {
  int64_t node_id = 0;
  int ranks = 0;
  int slots = 0;
};

struct Placement {
  int64_t job_id = 0;
  std::string slot_type;
  std::vector<NodeShare> nodes;  // the first is the head node
};

struct ScheduleDecision {
  std::vector<Placement> placements;
  std::map<int64_t, std::string> waiting;  // job id -> human reason
};

ScheduleDecision Schedule(std::vector<PendingJob> jobs, std::vector<NodeCapacity> nodes);

// Free capacity of the UP nodes given every current allocation.
std::vector<NodeCapacity> FreeCapacity(const std::vector<NodeRecord>& nodes,
                                       const std::vector<AllocationRecord>& allocations);

// Slots of `node` in use by `allocations` (any slot type), for the nodes listing.
int SlotsUsed(int64_t node_id, const std::vector<AllocationRecord>& allocations);

}  // namespace controlplane::service
