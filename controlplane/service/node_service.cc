#include "controlplane/service/node_service.h"

#include <algorithm>
#include <map>
#include <set>

#include "api/job_event_check.h"
#include "common/crypto.h"
#include "common/log.h"
#include "controlplane/service/checkpoints_service.h"
#include "controlplane/service/dataset_lifecycle.h"
#include "controlplane/service/roles.h"
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

// What one heartbeat may carry; anything past it is refused whole (400), nothing stored. One
// job's bad event is not: it is dropped alone (StoreEvents), so no job can fail its node's
// heartbeats.
constexpr size_t kMaxReportsPerHeartbeat = 10'000;
constexpr size_t kMaxLogChunkBytes = 4 * 1024 * 1024;
constexpr size_t kMaxReasonBytes = 1024;

Status CheckBounds(const api::HeartbeatRequest& req) {
  if (req.running.size() > kMaxReportsPerHeartbeat || req.finished.size() > kMaxReportsPerHeartbeat ||
      req.events.size() > kMaxReportsPerHeartbeat || req.logs.size() > kMaxReportsPerHeartbeat) {
    return common::InvalidArgument("too many reports in one heartbeat");
  }
  for (const auto& l : req.logs) {
    if (l.data.size() > kMaxLogChunkBytes) return common::InvalidArgument("log chunk over 4 MiB", "logs");
  }
  return Status::Ok();
}
}  // namespace

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
    // The join token may take over a name only from a node that is gone (DOWN) or that never had
    // a credential: a live node keeps its identity.
    EMBODY_ASSIGN_OR_RETURN(live, uow->tenants().HasLiveNodeToken(existing->id, now));
    if (existing->state == "UP" && live) {
      return Status(common::Code::kAlreadyExists,
                    "node \"" + req.name + "\" is registered and up; register with its own "
                    "credential, or wait until it is DOWN",
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

Result<nlohmann::json> NodeService::SetDraining(const Principal& p, int64_t node_id,
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
  return ToJson(*node, SlotsUsed(node_id, allocs));
}

Result<api::HeartbeatResponse> NodeService::Heartbeat(const Principal& p, int64_t node_id,
                                                      const api::HeartbeatRequest& req) {
  EMBODY_RETURN_IF_ERROR(RequireNode(p, node_id));
  EMBODY_RETURN_IF_ERROR(CheckBounds(req));
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(node, uow->nodes().Get(node_id));
  if (!node) return common::NotFound("node " + std::to_string(node_id) + " not registered");
  const int64_t now = now_();
  EMBODY_RETURN_IF_ERROR(uow->nodes().Touch(node_id, now));
  // Events and logs first: a job's last words arrive in the same heartbeat as its exit.
  std::map<std::string, uint64_t> dropped;
  EMBODY_RETURN_IF_ERROR(StoreEvents(*uow, node_id, req, now, &dropped));
  EMBODY_RETURN_IF_ERROR(StoreLogs(*uow, node_id, req));
  EMBODY_ASSIGN_OR_RETURN(mine, uow->allocations().ForNode(node_id));
  EMBODY_RETURN_IF_ERROR(AcknowledgeLaunches(*uow, req, mine));
  EMBODY_RETURN_IF_ERROR(ApplyReports(*uow, node_id, node->name, req, now));
  uint64_t lost = 0;
  EMBODY_ASSIGN_OR_RETURN(reply, Commands(*uow, node->name, mine, now, &lost));
  EMBODY_RETURN_IF_ERROR(uow->Commit());
  // Counted once committed: a heartbeat whose transaction failed gave nothing up.
  if (!dropped.empty() || lost > 0) {
    std::lock_guard<std::mutex> lock(dropped_mu_);
    for (const auto& [reason, n] : dropped) events_dropped_[reason] += n;
    launches_lost_ += lost;
  }
  // Freed slots, or a node back from DOWN: there may be something to place now.
  if ((!req.finished.empty() || node->state != "UP") && wake_) wake_();
  return reply;
}

Result<bool> NodeService::RanHere(UnitOfWork& uow, int64_t job_id, int64_t node_id) {
  EMBODY_ASSIGN_OR_RETURN(job, uow.jobs().Get(job_id, std::nullopt, false));
  if (!job) return false;
  EMBODY_ASSIGN_OR_RETURN(placement, uow.allocations().PlacementForJob(job_id));
  return HasAllocationOn(placement, node_id, false);
}

uint64_t NodeService::LaunchesLost() const {
  std::lock_guard<std::mutex> lock(dropped_mu_);
  return launches_lost_;
}

std::map<std::string, uint64_t> NodeService::EventsDropped() const {
  std::lock_guard<std::mutex> lock(dropped_mu_);
  return events_dropped_;
}

Status NodeService::StoreEvents(UnitOfWork& uow, int64_t node_id, const api::HeartbeatRequest& req,
                                int64_t now, std::map<std::string, uint64_t>* dropped) {
  // The last step event of each job in this heartbeat is stored even when the thinning policy
  // (metrics_history.h) does not keep its step: it is the job's latest step until the next one.
  std::map<int64_t, size_t> last_step;
  for (size_t i = 0; i < req.events.size(); ++i) {
    const api::JobEventReport& e = req.events[i];
    if (e.type == "step" && StepOf(e.data)) last_step[e.job_id] = i;
  }
  std::map<int64_t, bool> known;    // job id -> placed on this node by this server
  std::set<int64_t> provisional_dropped;
  for (size_t i = 0; i < req.events.size(); ++i) {
    const api::JobEventReport& e = req.events[i];
    // The agent checked it already; an older or faulty agent may not have. PostgreSQL cannot
    // store NUL in text or jsonb, and one failed statement would fail the whole heartbeat.
    if (auto bad = api::CheckJobEvent(e.type, e.data)) {
      ++(*dropped)[bad->reason];
      common::LogWarn("job event dropped",
                      {{"job_id", std::to_string(e.job_id)}, {"node_id", std::to_string(node_id)},
                       {"reason", bad->reason}, {"error", bad->message}});
      continue;
    }
    auto k = known.find(e.job_id);
    if (k == known.end()) {
      EMBODY_ASSIGN_OR_RETURN(here, RanHere(uow, e.job_id, node_id));
      k = known.emplace(e.job_id, here).first;
      if (!here) {
        common::LogWarn("events refused: job not placed on this node",
                        {{"job_id", std::to_string(e.job_id)}, {"node_id", std::to_string(node_id)}});
      }
    }
    if (!k->second) continue;  // not this node's job (or none at all): dropped, nothing stored
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
    if (e.type == "dataset") EMBODY_RETURN_IF_ERROR(RecordDatasetEvent(uow, e.job_id, e.data, t));
  }
  return Status::Ok();
}

Status NodeService::StoreLogs(UnitOfWork& uow, int64_t node_id, const api::HeartbeatRequest& req) {
  std::map<int64_t, std::optional<int>> known;  // job -> its current attempt, if placed here
  for (api::LogChunk chunk : req.logs) {
    if (chunk.offset < 0 || chunk.rank < -1 || chunk.rank > 1'000'000) continue;
    auto k = known.find(chunk.job_id);
    if (k == known.end()) {
      EMBODY_ASSIGN_OR_RETURN(here, RanHere(uow, chunk.job_id, node_id));
      std::optional<int> attempt;
      if (here) {
        EMBODY_ASSIGN_OR_RETURN(job, uow.jobs().Get(chunk.job_id, std::nullopt, false));
        if (job) attempt = job->attempt;
      }
      k = known.emplace(chunk.job_id, attempt).first;
      if (!here) {
        common::LogWarn("logs refused: job not placed on this node",
                        {{"job_id", std::to_string(chunk.job_id)},
                         {"node_id", std::to_string(node_id)}});
      }
    }
    if (!k->second) continue;
    // An earlier attempt's last bytes may come late (from the same node, when the job restarted
    // there); an attempt the job has not reached is no attempt of it.
    if (chunk.attempt < 0) chunk.attempt = *k->second;
    if (chunk.attempt > *k->second) continue;
    EMBODY_ASSIGN_OR_RETURN(size, log_files_.Append(chunk));
    EMBODY_RETURN_IF_ERROR(uow.logs().Upsert(
        chunk.job_id,
        {chunk.rank, log_files_.PathFor(chunk.job_id, chunk.attempt, chunk.rank), size,
         chunk.attempt}));
  }
  return Status::Ok();
}

Status NodeService::AcknowledgeLaunches(UnitOfWork& uow, const api::HeartbeatRequest& req,
                                        std::vector<AllocationRecord>& mine) {
  // A job the agent reports running or ended was launched there, whatever the agent's age.
  std::set<int64_t> reported(req.running.begin(), req.running.end());
  for (const api::FinishedJob& f : req.finished) reported.insert(f.job_id);
  std::map<int64_t, std::vector<int>> held;  // job -> attempts the agent holds
  for (const api::LaunchAck& l : req.launched) held[l.job_id].push_back(l.attempt);
  for (AllocationRecord& a : mine) {
    if (!a.is_head || a.launched) continue;
    bool acked = reported.count(a.job_id) > 0;
    if (!acked) {
      auto h = held.find(a.job_id);
      if (h == held.end()) continue;
      // Only the attempt this allocation is for: an agent still holding an earlier attempt of
      // the job has not got this one.
      EMBODY_ASSIGN_OR_RETURN(job, uow.jobs().Get(a.job_id, std::nullopt, false));
      if (!job) continue;
      acked = std::find(h->second.begin(), h->second.end(), job->attempt) != h->second.end();
    }
    if (!acked) continue;
    EMBODY_RETURN_IF_ERROR(uow.allocations().MarkLaunched(a.job_id, a.node_id));
    a.launched = true;
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
    // The agent's words, stored as text: nothing PostgreSQL would refuse, and bounded.
    std::string reason = api::StorableText(f.reason, kMaxReasonBytes);
    JobState to;
    if (job->state == JobState::kCancelling) {
      to = JobState::kCancelled;
      if (reason.empty()) reason = "cancelled";
    } else if (job->state == JobState::kRestarting && !f.killed && f.exit_code == 0) {
      // Preempted, but it ended on its own before the kill reached it: its work is done.
      to = JobState::kSucceeded;
    } else if (job->state == JobState::kRestarting) {
      // Preempted: whatever the exit code (a job that checkpoints on SIGTERM may exit 0), it
      // goes back to the queue with its submit time, and resumes from its latest checkpoint.
      reason = job->reason.empty() ? "preempted" : job->reason;
      reason += ", requeued";
      to = JobState::kPending;
    } else if (f.lost && (job->state == JobState::kScheduled || job->state == JobState::kRunning)) {
      // Its agent restarted under it and stopped what was left (agent/job_record.h): the job
      // did not fail, its node lost it. It restarts as after a node loss.
      if (reason.empty()) reason = "lost by node " + node_name;
      EMBODY_RETURN_IF_ERROR(Transition(uow, *job, JobState::kRestarting, reason, actor, now));
      if (job->attempt < job->spec.value("max_restarts", 0)) {
        job->attempt += 1;
        EMBODY_RETURN_IF_ERROR(Transition(uow, *job, JobState::kPending,
                                          reason + ", restart " + std::to_string(job->attempt),
                                          actor, now));
      } else {
        EMBODY_RETURN_IF_ERROR(Transition(uow, *job, JobState::kFailed, reason, actor, now));
      }
      continue;
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

Result<api::HeartbeatResponse> NodeService::Commands(UnitOfWork& uow, const std::string& node_name,
                                                     const std::vector<AllocationRecord>& mine,
                                                     int64_t now, uint64_t* lost) {
  api::HeartbeatResponse reply;
  for (const AllocationRecord& a : mine) {
    EMBODY_ASSIGN_OR_RETURN(job, uow.jobs().Get(a.job_id, std::nullopt, true));
    if (!job) continue;
    if (job->state == JobState::kScheduled && a.is_head && !a.launched &&
        a.launch_sends >= kLaunchSendsBeforeLost) {
      // Handed out in that many replies and never acknowledged: the node does not have it (its
      // agent lost it, or cannot take it). The job goes back to the queue as after a node loss,
      // the attempt counted against max_restarts.
      const std::string why = "launch not acknowledged by node " + node_name + " after " +
                              std::to_string(a.launch_sends) + " heartbeats";
      common::LogWarn("launch lost", {{"job", std::to_string(job->id)},
                                      {"attempt", std::to_string(job->attempt)},
                                      {"node", node_name}});
      EMBODY_RETURN_IF_ERROR(Transition(uow, *job, JobState::kRestarting, why, "server", now));
      if (job->attempt < job->spec.value("max_restarts", 0)) {
        job->attempt += 1;
        EMBODY_RETURN_IF_ERROR(Transition(uow, *job, JobState::kPending,
                                          why + ", restart " + std::to_string(job->attempt),
                                          "server", now));
      } else {
        EMBODY_RETURN_IF_ERROR(Transition(uow, *job, JobState::kFailed, why, "server", now));
      }
      ++*lost;
      continue;
    }
    if (job->state == JobState::kScheduled && a.is_head && !a.launched) {
      EMBODY_ASSIGN_OR_RETURN(hosts, uow.allocations().ForJob(a.job_id));
      api::Command c;
      c.type = api::Command::Type::kLaunch;
      c.job_id = job->id;
      c.tenant_id = job->tenant_id;
      c.tenant = job->tenant;
      c.attempt = job->attempt;
      EMBODY_ASSIGN_OR_RETURN(spec, LaunchSpecFor(uow, *job));
      c.spec = std::move(spec);
      for (const AllocationRecord& h : hosts) {
        c.hosts.push_back({h.node_id, h.node_name, h.node_address, h.ranks});
      }
      // A restarted job continues from where its last attempt got to.
      EMBODY_ASSIGN_OR_RETURN(ckpt, uow.events().LatestCheckpoint(job->id));
      if (ckpt) c.resume_from = ckpt->path;
      // And the checkpoint any node can fetch: its latest upload, or what it starts from.
      EMBODY_ASSIGN_OR_RETURN(blob, ResumeCheckpointFor(uow, *job));
      c.resume_checkpoint = blob;
      // No log_bytes: this attempt's logs are its own, from offset 0 (LogChunk::attempt).
      // Not yet launched: only acknowledged. Until then every reply carries it again, so a reply
      // lost to a timeout loses nothing; the agent takes a repeat as a no-op.
      EMBODY_RETURN_IF_ERROR(uow.allocations().CountLaunchSent(a.job_id, a.node_id));
      reply.commands.push_back(std::move(c));
    } else if (job->state == JobState::kCancelling || job->state == JobState::kRestarting) {
      if (a.is_head && !LaunchSent(a)) {
        // Never handed out: nothing to kill, nobody will report it finished. (A launch handed out
        // but not acknowledged may have arrived: it gets the kill, which an agent that never had
        // the job answers by reporting it ended at once.)
        if (job->state == JobState::kCancelling) {
          EMBODY_RETURN_IF_ERROR(Transition(uow, *job, JobState::kCancelled,
                                            "cancelled before launch", "server", now));
        } else {
          EMBODY_RETURN_IF_ERROR(Transition(uow, *job, JobState::kPending,
                                            job->reason + ", requeued", "server", now));
        }
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
  EMBODY_RETURN_IF_ERROR(RequireAtLeast(p, kViewer, "listing nodes"));
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
