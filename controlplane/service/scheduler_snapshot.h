// The scheduler's input built from the records the scheduler loop reads in its transaction:
// UP nodes with what is free on them (and every registered node's size, for "never fits"), the jobs
// that hold allocations (with their expected ends), the pending queue, and the tenants with what
// their jobs hold now. Pure; the loop does the reading and writing.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include <nlohmann/json.hpp>

#include "controlplane/service/scheduler.h"
#include "controlplane/service/store.h"

namespace controlplane::service {

// The resources and time limit of a stored (already validated) spec, defaults filled in.
api::Resources ResourcesOf(const nlohmann::json& spec);
int64_t TimeLimitSecondsOf(const nlohmann::json& spec);

// `jobs`: every PENDING job and every job that may hold allocations (SCHEDULED, RUNNING,
// CANCELLING, RESTARTING); jobs of other states are ignored, and so are holders without live
// allocations. CANCELLING and RESTARTING (preempted) jobs are marked as leaving.
// `tenants` carry weight, limits and usage; their slots_in_use and running_jobs are recounted
// here from the allocations. A job whose tenant is missing counts as weight 1, no limits.
// The scheduler's view of the tenants: weight and quota from their records, usage history from
// `usage` (none for a tenant missing there).
std::vector<SchedTenant> SchedTenantsOf(const std::vector<TenantRecord>& tenants,
                                        const std::map<int64_t, SlotSeconds>& usage);

ClusterSnapshot BuildSnapshot(int64_t now_ms, const std::vector<NodeRecord>& nodes,
                              const std::vector<AllocationRecord>& allocations,
                              const std::vector<JobRecord>& jobs,
                              std::vector<SchedTenant> tenants);

}  // namespace controlplane::service
