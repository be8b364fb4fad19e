// "Can this job ever run in this cluster?": the one decision behind both the 422 a submission
// gets (JobsService::Submit) and the "never fits:" reason a pending job waits with (the
// scheduler), so the two cannot disagree on the node set or the words. Pure; no store, no clock.
//
// A job never fits when its tenant's quota forbids it whatever else runs (more nodes per job or
// more slots than the quota allows, or no running jobs at all), or when fewer registered nodes
// than it asks for have enough slots of its type. Registered means UP, DOWN or draining alike:
// such nodes are expected back, and a job waits for them rather than being refused. What is
// merely busy or full now (slots held by other jobs, the running-jobs quota reached) is not
// decided here: the job waits and the scheduler says why.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/job_spec.h"
#include "controlplane/service/fair_share.h"
#include "controlplane/service/store.h"

namespace controlplane::service {

// A tenant's limits as the scheduler and the admission apply them; nullopt: no limit.
struct TenantLimits {
  std::optional<int64_t> slots;          // slots its jobs may hold at once
  std::optional<int64_t> running_jobs;   // jobs holding slots at once
  std::optional<int64_t> nodes_per_job;  // nodes one job may ask for
};

TenantLimits LimitsOf(const Quota& quota);

// Every registered node by size (NodeStore::Shapes gives the same from the database).
std::vector<NodeShape> NodeShapesOf(const std::vector<NodeRecord>& nodes);

// How many registered nodes have at least n slots of a kind: built once, asked per job in
// O(log sizes).
class NodeSizes {
 public:
  NodeSizes() = default;
  explicit NodeSizes(const std::vector<NodeShape>& shapes);
  int64_t CountAtLeast(int kind, int slots) const;
  int64_t nodes() const { return nodes_; }

 private:
  // Per kind: (slots, nodes with at least that many), slots ascending.
  std::array<std::vector<std::pair<int, int64_t>>, kSlotKinds> at_least_;
  int64_t nodes_ = 0;
};

struct NeverFits {
  std::string reason;  // starts "never fits: ", says what is short
  std::string field;   // the request field at fault, for the 422
};

// Why a job of these resources could never run under these limits on these nodes; nullopt
// when it could.
std::optional<NeverFits> WhyNeverFits(const api::Resources& r, const TenantLimits& limits,
                                      const NodeSizes& nodes);

}  // namespace controlplane::service
