// The nodes as the API and operators see them: an agent's registration (and the credential it
// gets), a cluster-admin's reset and drain, the nodes listing and Prometheus service discovery
// (node_service.h). The heartbeat is node_heartbeat.cc and its parts.
#include "controlplane/service/node_service.h"

#include <map>

#include "common/crypto.h"
#include "common/log.h"
#include "controlplane/service/roles.h"
#include "controlplane/service/scheduler.h"
#include "controlplane/service/scrape_targets.h"

namespace controlplane::service {

using api::JobState;

Result<api::v1::Node> NodeView(const NodeRecord& n, int slots_used) {
  auto gpus = api::v1::ParseGpus(n.gpus);
  auto isolation = api::v1::ParseNodeIsolation(n.isolation);
  for (const Status& st : {gpus.status(), isolation.status()}) {
    if (!st.ok()) {
      return common::Internal("node " + std::to_string(n.id) + " as stored: " + st.ToString());
    }
  }
  api::v1::Node v;
  v.id = n.id;
  v.name = n.name;
  v.address = n.address;
  v.agent_url = n.agent_url;
  v.state = n.state;
  v.cpu_slots = n.cpu_slots;
  v.gpus = std::move(*gpus);
  v.memory_bytes = n.memory_bytes;
  v.slots_used = slots_used;
  v.draining = n.draining;
  v.isolation = std::move(*isolation);
  v.last_heartbeat_ms = n.last_heartbeat_ms;
  return v;
}

Status RequireNode(const Principal& p, int64_t node_id) {
  if (p.role != kNodeRole) {
    return Status(common::Code::kPermissionDenied,
                  "agent calls need the node's own credential (from registration)");
  }
  if (p.node_id != node_id) {
    return Status(common::Code::kPermissionDenied,
                  "this credential belongs to node " + std::to_string(p.node_id) + ", not node " +
                      std::to_string(node_id));
  }
  return Status::Ok();
}

Result<api::RegisterResponse> NodeService::Register(const Principal& p,
                                                    const api::RegisterRequest& req) {
  if (p.role != kJoinRole && p.role != kNodeRole) {
    return Status(common::Code::kPermissionDenied,
                  "registering a node needs the cluster join token or the node's credential");
  }
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  const int64_t now = now_();
  EMBODY_ASSIGN_OR_RETURN(existing, uow->nodes().GetByName(req.name));
  api::RegisterResponse reply{0, heartbeat_interval_ms_, ""};
  if (p.role == kNodeRole) {
    // A node credential re-registers its own node and no other.
    if (!existing || existing->id != p.node_id) {
      return Status(common::Code::kPermissionDenied,
                    "this credential belongs to node " + std::to_string(p.node_id) +
                        ", not to a node named \"" + req.name + "\"",
                    "name");
    }
  } else if (existing) {
    // The join token, which every node holds, never takes over a name whose node has a
    // credential, UP or DOWN: that node's agent re-registers with its own credential, and only
    // an operator gives the name to another agent (Reset revokes the credential).
    EMBODY_ASSIGN_OR_RETURN(live, uow->tenants().HasLiveNodeToken(existing->id, now));
    if (live) {
      return Status(common::Code::kAlreadyExists,
                    "node \"" + req.name + "\" is registered (" + existing->state +
                        "); its agent re-registers with its own credential; to give the name "
                        "to another agent, a cluster-admin resets it first (embody nodes reset " +
                        req.name + ")",
                    "name");
    }
  }
  EMBODY_ASSIGN_OR_RETURN(id, uow->nodes().Upsert(req, now));
  reply.node_id = id;
  if (p.role == kJoinRole) {
    EMBODY_RETURN_IF_ERROR(uow->tenants().RevokeNodeTokens(id, now));
    const std::string secret = common::RandomToken();
    NewToken t;
    t.sha256_hex = common::Sha256Hex(secret);
    t.tenant_id = p.tenant_id;
    t.role = kNodeRole;
    t.name = "node " + req.name;
    t.node_id = id;
    t.created_by = p.token_id;
    t.now_ms = now;
    EMBODY_ASSIGN_OR_RETURN(token_id, uow->tenants().CreateToken(t));
    (void)token_id;
    reply.node_token = secret;
  }
  EMBODY_RETURN_IF_ERROR(uow->Commit());
  common::LogInfo("node registered", {{"node", req.name}, {"node_id", std::to_string(id)},
                                      {"cpu_slots", std::to_string(req.cpu_slots)},
                                      {"credential", reply.node_token.empty() ? "kept" : "issued"}});
  if (wake_) wake_();
  return reply;
}

Result<api::v1::Node> NodeService::Reset(const Principal& p, int64_t node_id) {
  if (!p.IsClusterAdmin()) {
    return Status(common::Code::kPermissionDenied, "resetting nodes needs role cluster-admin");
  }
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  const int64_t now = now_();
  EMBODY_ASSIGN_OR_RETURN(node, uow->nodes().Get(node_id));
  if (!node) return common::NotFound("node " + std::to_string(node_id) + " not found");
  // Its credential is revoked: the agent holding it is refused from its next call and goes
  // silent, so the node is DOWN and its jobs restart elsewhere as after a node loss; the join
  // token may then register the name again.
  EMBODY_RETURN_IF_ERROR(uow->tenants().RevokeNodeTokens(node_id, now));
  EMBODY_ASSIGN_OR_RETURN(allocs, uow->allocations().ForNode(node_id));
  EMBODY_RETURN_IF_ERROR(uow->Commit());
  common::LogInfo("node reset", {{"node", node->name}, {"node_id", std::to_string(node_id)}});
  return NodeView(*node, SlotsUsed(node_id, allocs));
}

Result<api::v1::Node> NodeService::SetDraining(const Principal& p, int64_t node_id,
                                               bool draining) {
  if (!p.IsClusterAdmin()) {
    return Status(common::Code::kPermissionDenied, "draining nodes needs role cluster-admin");
  }
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(node, uow->nodes().Get(node_id));
  if (!node) return common::NotFound("node " + std::to_string(node_id) + " not found");
  EMBODY_RETURN_IF_ERROR(uow->nodes().SetDraining(node_id, draining));
  EMBODY_ASSIGN_OR_RETURN(allocs, uow->allocations().ForNode(node_id));
  node->draining = draining;
  EMBODY_RETURN_IF_ERROR(uow->Commit());
  common::LogInfo(draining ? "node draining" : "node undrained", {{"node", node->name}});
  if (!draining && wake_) wake_();
  return NodeView(*node, SlotsUsed(node_id, allocs));
}

Result<api::v1::NodeList> NodeService::List(const Principal& p) {
  EMBODY_RETURN_IF_ERROR(RequireAtLeast(p, kViewer, "listing nodes"));
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(nodes, uow->nodes().List());
  EMBODY_ASSIGN_OR_RETURN(allocs, uow->allocations().All());
  api::v1::NodeList out;
  for (const NodeRecord& n : nodes) {
    EMBODY_ASSIGN_OR_RETURN(view, NodeView(n, SlotsUsed(n.id, allocs)));
    out.nodes.push_back(std::move(view));
  }
  return out;
}

Result<nlohmann::json> NodeService::ScrapeTargets(const Principal& p,
                                                  const std::string& server_address,
                                                  bool server_tls) {
  if (!MayMonitor(p)) {
    return Status(common::Code::kPermissionDenied,
                  "service discovery needs a monitoring or cluster-admin token");
  }
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(nodes, uow->nodes().List());
  // The running jobs' placements: one target per job and node, labelled from these records.
  EMBODY_ASSIGN_OR_RETURN(running, uow->jobs().ListInStates({JobState::kRunning}, false));
  std::vector<int64_t> ids;
  std::map<int64_t, std::string> tenants;
  for (const JobRecord& j : running) {
    ids.push_back(j.id);
    tenants[j.id] = j.tenant;
  }
  std::vector<JobPlacement> placed;
  if (!ids.empty()) {
    EMBODY_ASSIGN_OR_RETURN(placements, uow->allocations().ForJobs(ids));
    for (const auto& [job_id, allocs] : placements) {
      for (const AllocationRecord& a : allocs) placed.push_back({job_id, tenants[job_id], a.node_id});
    }
  }
  return service::ScrapeTargets(server_address, nodes, std::move(placed), server_tls);
}

}  // namespace controlplane::service
