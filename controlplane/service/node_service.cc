#include "controlplane/service/node_service.h"

#include <map>
#include <set>

#include "common/log.h"
#include "controlplane/service/job_view.h"
#include "controlplane/service/metrics_history.h"
#include "controlplane/service/scheduler.h"
#include "controlplane/service/scrape_targets.h"
#include "controlplane/service/transitions.h"

namespace controlplane::service {

using api::JobState;

namespace {
bool HasAllocationOn(const std::vector<AllocationRecord>& allocs, int64_t node_id, bool head) {
  for (const AllocationRecord& a : allocs) {
    if (a.node_id == node_id && (!head || a.is_head)) return true;
  }
  return false;
}
}  // namespace

Status RequireAgent(const Principal& p) {
  if (p.role == "agent" || p.role == "cluster-admin") return Status::Ok();
  return Status(common::Code::kPermissionDenied, "agent endpoints need role agent");
}

Result<api::RegisterResponse> NodeService::Register(const Principal& p,
                                                    const api::RegisterRequest& req) {
  EMBODY_RETURN_IF_ERROR(RequireAgent(p));
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(id, uow->nodes().Upsert(req, now_()));
  EMBODY_RETURN_IF_ERROR(uow->Commit());
  common::LogInfo("node registered", {{"node", req.name}, {"node_id", std::to_string(id)},
                                      {"cpu_slots", std::to_string(req.cpu_slots)}});
  if (wake_) wake_();
  return api::RegisterResponse{id, heartbeat_interval_ms_};
}

Result<api::HeartbeatResponse> NodeService::Heartbeat(const Principal& p, int64_t node_id,
                                                      const api::HeartbeatRequest& req) {
  EMBODY_RETURN_IF_ERROR(RequireAgent(p));
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(node, uow->nodes().Get(node_id));
  if (!node) return common::NotFound("node " + std::to_string(node_id) + " not registered");
  const int64_t now = now_();
  EMBODY_RETURN_IF_ERROR(uow->nodes().Touch(node_id, now));
  // Events and logs first: a job's last words arrive in the same heartbeat as its exit.
  EMBODY_RETURN_IF_ERROR(StoreEvents(*uow, req, now));
  EMBODY_RETURN_IF_ERROR(StoreLogs(*uow, req));
  EMBODY_RETURN_IF_ERROR(ApplyReports(*uow, node_id, node->name, req, now));
  EMBODY_ASSIGN_OR_RETURN(reply, Commands(*uow, node_id, now));
  EMBODY_RETURN_IF_ERROR(uow->Commit());
  // Freed slots, or a node back from DOWN: there may be something to place now.
  if ((!req.finished.empty() || node->state != "UP") && wake_) wake_();
  return reply;
}

Status NodeService::StoreEvents(UnitOfWork& uow, const api::HeartbeatRequest& req, int64_t now) {
  // The last step event of each job in this heartbeat is stored even when the thinning policy
  // (metrics_history.h) does not keep its step: it is the job's latest step until the next one.
  std::map<int64_t, size_t> last_step;
  for (size_t i = 0; i < req.events.size(); ++i) {
    const api::JobEventReport& e = req.events[i];
    if (e.type == "step" && StepOf(e.data)) last_step[e.job_id] = i;
  }
  std::map<int64_t, bool> known;    // job id -> exists on this server
  std::set<int64_t> provisional_dropped;
  for (size_t i = 0; i < req.events.size(); ++i) {
    const api::JobEventReport& e = req.events[i];
    if (e.type.empty()) continue;
    auto k = known.find(e.job_id);
    if (k == known.end()) {
      EMBODY_ASSIGN_OR_RETURN(job, uow.jobs().Get(e.job_id, std::nullopt, false));
      k = known.emplace(e.job_id, job.has_value()).first;
    }
    if (!k->second) continue;  // a job this server never had: drop, do not fail
    const int64_t t = e.time_ms > 0 ? e.time_ms : now;
    if (auto step = e.type == "step" ? StepOf(e.data) : std::nullopt) {
      if (provisional_dropped.insert(e.job_id).second) {
        EMBODY_RETURN_IF_ERROR(uow.events().DropProvisionalSteps(e.job_id));
      }
      const bool keep = KeepStep(*step);
      if (keep || last_step[e.job_id] == i) {
        EMBODY_ASSIGN_OR_RETURN(id, uow.events().AppendStep(e.job_id, t, *step, e.data, !keep));
        (void)id;
      }
      continue;
    }
    EMBODY_ASSIGN_OR_RETURN(id, uow.events().Append(e.job_id, t, e.type, e.data));
    (void)id;
    if (e.type == "checkpoint" && e.data.is_object()) {
      const auto& d = e.data;
      if (d.contains("step") && d["step"].is_number_integer() && d.contains("path") &&
          d["path"].is_string()) {
        CheckpointRecord c{d["step"].get<int64_t>(), d["path"].get<std::string>(),
                           d.value("bytes", int64_t{0})};
        EMBODY_RETURN_IF_ERROR(uow.events().AddCheckpoint(e.job_id, c, t));
      }
    }
  }
  return Status::Ok();
}

Status NodeService::StoreLogs(UnitOfWork& uow, const api::HeartbeatRequest& req) {
  for (const api::LogChunk& chunk : req.logs) {
    if (chunk.offset < 0 || chunk.rank < -1) continue;
    EMBODY_ASSIGN_OR_RETURN(job, uow.jobs().Get(chunk.job_id, std::nullopt, false));
    if (!job) continue;
    EMBODY_ASSIGN_OR_RETURN(size, log_files_.Append(chunk));
    EMBODY_RETURN_IF_ERROR(
        uow.logs().Upsert(chunk.job_id, {chunk.rank, log_files_.PathFor(chunk.job_id, chunk.rank),
                                         size}));
  }
  return Status::Ok();
}

Status NodeService::ApplyReports(UnitOfWork& uow, int64_t node_id, const std::string& node_name,
                                 const api::HeartbeatRequest& req, int64_t now) {
  const std::string actor = "agent/" + node_name;
  for (int64_t id : req.running) {
    EMBODY_ASSIGN_OR_RETURN(job, uow.jobs().Get(id, std::nullopt, true));
    if (!job || job->state != JobState::kScheduled) continue;
    EMBODY_ASSIGN_OR_RETURN(allocs, uow.allocations().ForJob(id));
    if (!HasAllocationOn(allocs, node_id, false)) continue;
    EMBODY_RETURN_IF_ERROR(Transition(uow, *job, JobState::kRunning, "", actor, now));
  }
  for (const api::FinishedJob& f : req.finished) {
    EMBODY_ASSIGN_OR_RETURN(job, uow.jobs().Get(f.job_id, std::nullopt, true));
    if (!job) continue;
    EMBODY_ASSIGN_OR_RETURN(allocs, uow.allocations().ForJob(f.job_id));
    // Only the head's report counts, and only for the attempt that still holds this node; a
    // report repeated after the job ended finds no allocation and is ignored.
    if (!HasAllocationOn(allocs, node_id, true)) continue;
    std::string reason = f.reason;
    JobState to;
    if (job->state == JobState::kCancelling) {
      to = JobState::kCancelled;
      if (reason.empty()) reason = "cancelled";
    } else if (job->state == JobState::kScheduled || job->state == JobState::kRunning) {
      to = f.exit_code == 0 ? JobState::kSucceeded : JobState::kFailed;
      if (reason.empty() && f.exit_code != 0) {
        reason = "exited with code " + std::to_string(f.exit_code);
      }
    } else {
      continue;
    }
    job->exit_code = f.exit_code;
    EMBODY_RETURN_IF_ERROR(Transition(uow, *job, to, reason, actor, now));
  }
  return Status::Ok();
}

Result<api::HeartbeatResponse> NodeService::Commands(UnitOfWork& uow, int64_t node_id,
                                                     int64_t now) {
  api::HeartbeatResponse reply;
  EMBODY_ASSIGN_OR_RETURN(mine, uow.allocations().ForNode(node_id));
  for (const AllocationRecord& a : mine) {
    EMBODY_ASSIGN_OR_RETURN(job, uow.jobs().Get(a.job_id, std::nullopt, true));
    if (!job) continue;
    if (job->state == JobState::kScheduled && a.is_head && !a.launched) {
      EMBODY_ASSIGN_OR_RETURN(hosts, uow.allocations().ForJob(a.job_id));
      api::Command c;
      c.type = api::Command::Type::kLaunch;
      c.job_id = job->id;
      c.tenant_id = job->tenant_id;
      c.tenant = job->tenant;
      c.attempt = job->attempt;
      c.spec = job->spec;
      for (const AllocationRecord& h : hosts) {
        c.hosts.push_back({h.node_id, h.node_name, h.node_address, h.ranks});
      }
      // A restarted job continues from where its last attempt got to.
      EMBODY_ASSIGN_OR_RETURN(ckpt, uow.events().LatestCheckpoint(job->id));
      if (ckpt) c.resume_from = ckpt->path;
      EMBODY_RETURN_IF_ERROR(uow.allocations().MarkLaunched(a.job_id, node_id));
      reply.commands.push_back(std::move(c));
    } else if (job->state == JobState::kCancelling) {
      if (a.is_head && !a.launched) {
        // Never started anywhere: nothing to kill, nobody will report it finished.
        EMBODY_RETURN_IF_ERROR(Transition(uow, *job, JobState::kCancelled,
                                          "cancelled before launch", "server", now));
        continue;
      }
      api::Command c;
      c.type = api::Command::Type::kKill;
      c.job_id = job->id;
      reply.commands.push_back(std::move(c));
    }
  }
  return reply;
}

Result<nlohmann::json> NodeService::List(const Principal& p) {
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(nodes, uow->nodes().List());
  EMBODY_ASSIGN_OR_RETURN(allocs, uow->allocations().All());
  nlohmann::json out = nlohmann::json::array();
  for (const NodeRecord& n : nodes) out.push_back(ToJson(n, SlotsUsed(n.id, allocs)));
  return nlohmann::json{{"nodes", out}};
}

Result<nlohmann::json> NodeService::ScrapeTargets(const Principal& p,
                                                  const std::string& server_address) {
  if (!p.IsClusterAdmin()) {
    return Status(common::Code::kPermissionDenied,
                  "service discovery needs a cluster-admin token");
  }
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(nodes, uow->nodes().List());
  return service::ScrapeTargets(server_address, nodes);
}

}  // namespace controlplane::service
