// The scheduling decision as one pure function: a snapshot of the cluster (nodes, tenants,
// running jobs), the queue and the options in; placements, reservations, preemptions and a "why
// not" for every job that waits out. No I/O, no clock: the scheduler loop feeds it from the
// database and writes its answer back in one transaction.
//
// Policy, in the order it applies to each pending job:
//  - Order: priority (higher first); among equal priorities, the tenant with the lowest weighted
//    dominant share (fair_share.h) goes next, its shares updated as this cycle places its jobs;
//    then age (submit time), then id.
//  - A job that could never fit (job_fit.h, on the registered nodes) waits with a reason
//    starting "never fits:".
//  - Quotas: a job whose tenant would exceed its slot or running-job quota waits
//    ("tenant quota: slots 8/8", "tenant quota: running jobs 4/4").
//  - Gang placement: `nodes` distinct nodes that are not draining, each with ranks_per_node *
//    slots_per_rank free slots of the slot type, or nothing; the fullest nodes that fit first
//    (best fit). The first node is the head.
//  - Backfill: starting a job now must not delay any reservation (slot_timeline.h): it fits in
//    slots no reservation needs, or its time limit ends before the reservation starts. Jobs
//    without a time limit therefore backfill only where no reservation waits.
//  - Reservations: each of the first `max_reservations` jobs that cannot start reserves the
//    nodes that will have room soonest (from running jobs' start + time limit; jobs without a
//    limit never free their slots in this model), from the time the last of them has room.
//  - Preemption (opt-in): a job with priority >= preempt_min_priority that cannot start may
//    preempt strictly lower-priority running jobs, lowest priority first, then the youngest
//    (latest start), keeping the fewest that make it fit. Another tenant's job is a victim only
//    while that tenant is above its fair share: its share is at least the preempting tenant's
//    once the job is placed (as Kueue's LessThanOrEqualToFinalShare), so a high priority buys
//    precedence among a tenant's own jobs and over tenants using more than their weight, never
//    a larger part of the cluster than the weight gives. Victims are expected to have
//    checkpointed and exited `preempt_grace_ms` from now; nothing is placed over them in this
//    cycle, and a reservation holds their nodes for the job, which waits with the reason
//    "preempting jobs 12, 14" until they are gone.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "api/job_spec.h"
#include "controlplane/service/fair_share.h"
#include "controlplane/service/job_fit.h"
#include "controlplane/service/store.h"

namespace controlplane::service {

struct SchedNode {
  int64_t id = 0;
  std::string name;
  int total_cpu = 0;
  int total_gpu = 0;
  int free_cpu = 0;
  int free_gpu = 0;
  bool draining = false;  // takes no new jobs
};

struct SchedTenant {
  int64_t id = 0;
  std::string name;
  double weight = 1;  // > 0
  TenantLimits limits;
  int64_t slots_in_use = 0;  // by its jobs that hold allocations now
  int64_t running_jobs = 0;  // its jobs that hold allocations now
  SlotSeconds usage{};       // decayed slot-seconds (fair_share.h)
};

struct NodeShare {
  int64_t node_id = 0;
  int ranks = 0;
  int slots = 0;
};

struct RunningJob {
  int64_t job_id = 0;
  int64_t tenant_id = 0;
  int priority = 0;
  int64_t start_ms = 0;
  int64_t time_limit_seconds = 0;  // 0: none (never expected to end)
  std::string slot_type;
  std::vector<NodeShare> nodes;
  bool preempting = false;  // already told to leave by an earlier cycle's preemption
};

struct PendingJob {
  int64_t job_id = 0;
  int64_t tenant_id = 0;
  int priority = 0;
  int64_t submit_ms = 0;
  api::Resources resources;
  int64_t time_limit_seconds = 0;  // 0: none
};

struct ClusterSnapshot {
  int64_t now_ms = 0;
  std::vector<SchedNode> nodes;
  // Every registered node (UP, DOWN, draining), for "never fits" (job_fit.h); nullopt: the
  // nodes above are all there are.
  std::optional<std::vector<NodeShape>> registered;
  std::vector<SchedTenant> tenants;  // a job's tenant missing here: weight 1, no limits
  std::vector<RunningJob> running;
  std::vector<PendingJob> pending;
};

struct ScheduleOptions {
  std::optional<int> preempt_min_priority;  // nullopt: no preemption
  double fair_share_half_life_seconds = 24 * 3600.0;
  int max_reservations = 16;
  int64_t preempt_grace_ms = 60'000;  // expected time for a victim to checkpoint and exit
  // false: `waiting` is left empty (placements, reservations and preemptions are the same). The
  // forecaster's forward run asks for reasons only in its first cycle; writing one per waiting
  // job is most of a cycle's cost with a long queue.
  bool explain = true;
  // With explain: the reason of this job only (0: of every job). A dry run's first cycle
  // (forecast.h) needs its own job's reason and the order, not 10,000 strings.
  int64_t explain_job = 0;
};

struct Placement {
  int64_t job_id = 0;
  std::string slot_type;
  std::vector<NodeShare> nodes;  // the first is the head node
};

struct Reservation {
  int64_t job_id = 0;
  std::vector<int64_t> node_ids;
  int64_t start_ms = 0;  // when the last of them is expected to have room
};

struct Preemption {
  int64_t job_id = 0;              // the job they make room for
  std::vector<int64_t> victims;    // running jobs to checkpoint and stop, ascending ids
  std::map<int64_t, std::string> why;  // victim -> why it may be preempted, for its job event
};

// What placing a job asks for: slot kind (job_fit.h), slots per node, nodes, time limit seconds.
using JobShape = std::tuple<int, int, int, int64_t>;

// True when a job of shape `a` asks for no more than one of `b`: the same kind, no more slots
// per node or nodes, and no longer (a time limit of 0 is none: forever). If `a` cannot be placed
// now, neither can `b`.
bool AsksNoMore(const JobShape& a, const JobShape& b);

// Where a decision over a kept queue (ScheduleQueue) stopped, the jobs it did not consider being
// unable to place, reserve or preempt anything: no job left had a shape that could be placed, and
// every reservation was made or no shape left could reserve (with preemption on, every
// reservation was made).
struct QueueStop {
  bool before_any = false;  // it considered no job
  int priority = 0;         // else the priority it stopped in
  // The tenants with jobs of that priority it did not consider.
  std::vector<int64_t> tenants_left;
  // The shapes of the jobs left that dominate the others (no fewer slots, nodes and time than
  // one of them): each could not be placed, and neither can anything asking at least as much.
  std::vector<JobShape> unplaceable;
  bool reservations_made = false;  // every reservation the cycle may make
  // Else shapes (time limit 0) whose reservation failed: a job asking at least their slots and
  // nodes cannot reserve either.
  std::vector<JobShape> unreservable;
};

struct ScheduleDecision {
  std::vector<Placement> placements;
  std::map<int64_t, std::string> waiting;  // job id -> human reason, for every job not placed
  std::vector<Reservation> reservations;
  std::vector<Preemption> preemptions;
  // Every pending job id, in the order it was considered. ScheduleQueue without reasons lists
  // a job passed over as inert (it could change nothing) where its tenant's turn passed it.
  std::vector<int64_t> order;
  std::optional<QueueStop> settled;  // ScheduleQueue only: where it stopped, if before the end
};

ScheduleDecision Schedule(const ClusterSnapshot& snapshot, const ScheduleOptions& options);

class PendingQueue;
// Schedule() with the pending jobs of `queue` (pending_queue.h) instead of snapshot.pending, for
// a caller that decides many times over a queue that only loses jobs. Placements, reservations
// and preemptions are Schedule()'s; with options.explain off the cycle stops once the jobs left
// can change nothing, and `order` lists only the jobs it considered.
ScheduleDecision ScheduleQueue(const ClusterSnapshot& snapshot, const PendingQueue& queue,
                               const ScheduleOptions& options);

// The registered nodes of a snapshot by size: what WhyNeverFits is asked about for its jobs.
NodeSizes RegisteredSizes(const ClusterSnapshot& snapshot);

// The scheduler's view of the UP nodes (draining ones included, marked) given every current
// allocation.
std::vector<SchedNode> SchedNodes(const std::vector<NodeRecord>& nodes,
                                  const std::vector<AllocationRecord>& allocations);

// Slots of `node` in use by `allocations` (any slot type), for the nodes listing.
int SlotsUsed(int64_t node_id, const std::vector<AllocationRecord>& allocations);

}  // namespace controlplane::service
