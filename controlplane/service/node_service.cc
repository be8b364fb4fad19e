#include "controlplane/service/node_service.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "api/job_event_check.h"
#include "common/crypto.h"
#include "common/log.h"
#include "controlplane/service/checkpoints_service.h"
#include "controlplane/service/dataset_lifecycle.h"
#include "controlplane/service/evaluations.h"
#include "controlplane/service/job_view.h"
#include "controlplane/service/metrics_history.h"
#include "controlplane/service/roles.h"
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

// The nodes a job holds allocations on, as read for this heartbeat.
std::vector<int64_t> NodesOf(const std::map<int64_t, std::vector<AllocationRecord>>& live,
                             int64_t job_id) {
  std::vector<int64_t> nodes;
  auto it = live.find(job_id);
  if (it == live.end()) return nodes;
  for (const AllocationRecord& a : it->second) nodes.push_back(a.node_id);
  return nodes;
}

// What one heartbeat may carry; anything past it is refused whole (400), nothing stored. One
// job's bad event is not: it is dropped alone (StoreEvents), so no job can fail its node's
// heartbeats.
constexpr size_t kMaxReportsPerHeartbeat = 10'000;
constexpr size_t kMaxLogChunkBytes = 4 * 1024 * 1024;
constexpr size_t kMaxReasonBytes = 1024;

Status CheckBounds(const api::HeartbeatRequest& req) {
  if (req.running.size() > kMaxReportsPerHeartbeat || req.finished.size() > kMaxReportsPerHeartbeat ||
      req.events.size() > kMaxReportsPerHeartbeat || req.logs.size() > kMaxReportsPerHeartbeat ||
      req.launched.size() > kMaxReportsPerHeartbeat || req.workers.size() > kMaxReportsPerHeartbeat) {
    return common::InvalidArgument("too many reports in one heartbeat");
  }
  for (const auto& l : req.logs) {
    if (l.data.size() > kMaxLogChunkBytes) return common::InvalidArgument("log chunk over 4 MiB", "logs");
  }
  return Status::Ok();
}

// Whether a reply says something the agent does not already hold: anything but short worker
// assignments. Only such a reply ends a held heartbeat.
bool HasNews(const api::HeartbeatResponse& reply) {
  for (const api::Command& c : reply.commands) {
    if (!(c.type == api::Command::Type::kWorker && c.held)) return true;
  }
  return false;
}

}  // namespace

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

Result<api::HeartbeatResponse> NodeService::Heartbeat(const Principal& p, int64_t node_id,
                                                      const api::HeartbeatRequest& req) {
  // Read before the first transaction: a placement committed after it wakes the wait below.
  uint64_t generation = waiters_ ? waiters_->Generation(node_id) : 0;
  uint64_t pass = 0;
  EMBODY_ASSIGN_OR_RETURN(reply, Beat(p, node_id, req, &pass));
  // Only a heartbeat that reports nothing is held until a command exists: an agent gives up on
  // such a call when one of its jobs ends (to report it at once), and resends only what is safe
  // to resend. One that reported ends (its agent does not give it up) waits only for the
  // scheduling pass those ends woke, so that the freed slots' next job comes back in its reply.
  const bool holdable = waiters_ && req.wait_ms > 0 && req.finished.empty() &&
                        req.events.empty() && req.logs.empty();
  const bool awaits_pass = waiters_ && req.wait_ms > 0 && pass != 0;
  if ((!holdable && !awaits_pass) || HasNews(reply)) return reply;
  const int wait_ms = std::min(req.wait_ms, heartbeat_interval_ms_);
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::milliseconds(awaits_pass ? std::min(wait_ms, kPassWaitMs) : wait_ms);
  api::HeartbeatRequest again;  // what the agent holds, as it said; nothing to store twice
  again.running = req.running;
  again.launched = req.launched;
  again.has_launched = req.has_launched;
  again.workers = req.workers;
  again.has_workers = req.has_workers;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return reply;
    if (awaits_pass) {
      // Over without a command for this node (nothing fit, or it went elsewhere): the reply
      // as it was; the agent's next heartbeat is held as usual.
      if (waiters_->WaitForPass(node_id, generation, pass, left) !=
          NodeWaiters::PassWait::kNotified) {
        return reply;
      }
    } else if (!waiters_->Wait(node_id, generation, left)) {
      return reply;
    }
    generation = waiters_->Generation(node_id);
    EMBODY_ASSIGN_OR_RETURN(fresh, Beat(p, node_id, again));
    if (HasNews(fresh)) return fresh;
    reply = std::move(fresh);  // woken for another node (NotifyAll): wait on
  }
}

Result<api::HeartbeatResponse> NodeService::Beat(const Principal& p, int64_t node_id,
                                                 const api::HeartbeatRequest& req,
                                                 uint64_t* pass) {
  EMBODY_RETURN_IF_ERROR(RequireNode(p, node_id));
  // Heard now, whatever the database makes it wait for (node_heard.h).
  if (heard_) heard_->Heard(node_id, now_());
  EMBODY_RETURN_IF_ERROR(CheckBounds(req));
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(node, uow->nodes().Get(node_id));
  if (!node) return common::NotFound("node " + std::to_string(node_id) + " not registered");
  const int64_t now = now_();
  EMBODY_RETURN_IF_ERROR(uow->nodes().Touch(node_id, now));
  EMBODY_ASSIGN_OR_RETURN(reads, Read(*uow, node_id, req));
  // Events and logs first: a job's last words arrive in the same heartbeat as its exit.
  std::map<std::string, uint64_t> dropped;
  EMBODY_RETURN_IF_ERROR(StoreEvents(*uow, node_id, req, reads, now, &dropped));
  EMBODY_RETURN_IF_ERROR(StoreLogs(*uow, node_id, req, reads));
  EMBODY_RETURN_IF_ERROR(AcknowledgeLaunches(*uow, node_id, req, reads));
  EMBODY_RETURN_IF_ERROR(LockChanging(*uow, req, reads));
  EMBODY_RETURN_IF_ERROR(ApplyReports(*uow, node_id, node->name, req, reads, now));
  uint64_t lost = 0;
  EMBODY_ASSIGN_OR_RETURN(reply, Commands(*uow, node_id, node->name, req, reads, now, &lost));
  EMBODY_RETURN_IF_ERROR(uow->Commit());
  if (on_launch_phases_) {
    for (const LaunchPhases& ended : reads.ended) on_launch_phases_(ended);
  }
  // And heard when answered: the node's silence is from its reply to its next heartbeat, not
  // from the arrival of a heartbeat that the database held up.
  if (heard_) heard_->Heard(node_id, now_());
  // Counted once committed: a heartbeat whose transaction failed gave nothing up.
  if (!dropped.empty() || lost > 0) {
    std::lock_guard<std::mutex> lock(dropped_mu_);
    for (const auto& [reason, n] : dropped) events_dropped_[reason] += n;
    launches_lost_ += lost;
  }
  // Freed slots, or a node back from DOWN: there may be something to place now.
  if (!req.finished.empty() && wake_for_pass_) {
    const uint64_t woken = wake_for_pass_();
    if (pass) *pass = woken;
  } else if ((!req.finished.empty() || node->state != "UP") && wake_) {
    wake_();
  }
  return reply;
}

Result<NodeService::HeartbeatReads> NodeService::Read(UnitOfWork& uow, int64_t node_id,
                                                      const api::HeartbeatRequest& req) {
  HeartbeatReads r;
  EMBODY_ASSIGN_OR_RETURN(mine, uow.allocations().ForNode(node_id));
  r.mine = std::move(mine);
  std::vector<int64_t> ids(req.running.begin(), req.running.end());
  for (const AllocationRecord& a : r.mine) ids.push_back(a.job_id);
  for (const api::FinishedJob& f : req.finished) ids.push_back(f.job_id);
  for (const api::LaunchAck& l : req.launched) ids.push_back(l.job_id);
  std::vector<int64_t> reporting;  // jobs with events or log bytes
  for (const api::JobEventReport& e : req.events) reporting.push_back(e.job_id);
  for (const api::LogChunk& c : req.logs) reporting.push_back(c.job_id);
  ids.insert(ids.end(), reporting.begin(), reporting.end());
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  EMBODY_ASSIGN_OR_RETURN(jobs, uow.jobs().GetMany(ids, false));
  for (JobRecord& j : jobs) r.jobs.emplace(j.id, std::move(j));
  if (!req.finished.empty()) {
    std::vector<int64_t> finished;
    for (const api::FinishedJob& f : req.finished) finished.push_back(f.job_id);
    EMBODY_ASSIGN_OR_RETURN(sent, uow.events().LatestOfJobs(finished, kLaunchSentEvent));
    r.launches_sent = std::move(sent);
  }
  if (!reporting.empty()) {
    std::sort(reporting.begin(), reporting.end());
    reporting.erase(std::unique(reporting.begin(), reporting.end()), reporting.end());
    EMBODY_ASSIGN_OR_RETURN(placements, uow.allocations().PlacementForJobs(reporting));
    r.placements = std::move(placements);
  }
  return r;
}

Status NodeService::LockChanging(UnitOfWork& uow, const api::HeartbeatRequest& req,
                                 HeartbeatReads& r) {
  auto state = [&r](int64_t id) -> std::optional<JobState> {
    auto j = r.jobs.find(id);
    if (j == r.jobs.end()) return std::nullopt;
    return j->second.state;
  };
  std::vector<int64_t> changing;
  for (int64_t id : req.running) {
    if (state(id) == JobState::kScheduled) changing.push_back(id);
  }
  for (const api::FinishedJob& f : req.finished) {
    if (state(f.job_id)) changing.push_back(f.job_id);
  }
  for (const AllocationRecord& a : r.mine) {
    if (!a.is_head) continue;
    const std::optional<JobState> s = state(a.job_id);
    // A launch to hand out (or give up on), or a job to end before its launch went out.
    if ((s == JobState::kScheduled && !a.launched) ||
        ((s == JobState::kCancelling || s == JobState::kRestarting) && !LaunchSent(a))) {
      changing.push_back(a.job_id);
    }
  }
  if (changing.empty()) return Status::Ok();
  EMBODY_ASSIGN_OR_RETURN(locked, uow.jobs().GetMany(changing, true));
  for (JobRecord& j : locked) r.jobs[j.id] = std::move(j);
  EMBODY_ASSIGN_OR_RETURN(live, uow.allocations().ForJobs(changing));
  r.live = std::move(live);
  return Status::Ok();
}

uint64_t NodeService::LaunchesLost() const {
  std::lock_guard<std::mutex> lock(dropped_mu_);
  return launches_lost_;
}

std::map<std::string, uint64_t> NodeService::EventsDropped() const {
  std::lock_guard<std::mutex> lock(dropped_mu_);
  return events_dropped_;
}

namespace {
// What a head's launch and another node's worker command share: the job, its attempt, the spec
// as the engine takes it, and the bytes of each rank's log the server holds for this attempt
// (a job placed again without a new attempt, preempted, continues its logs after them; each
// attempt's logs are otherwise its own, LogChunk::attempt).
Result<api::Command> JobCommand(UnitOfWork& uow, api::Command::Type type, const JobRecord& job) {
  api::Command c;
  c.type = type;
  c.job_id = job.id;
  c.tenant_id = job.tenant_id;
  c.tenant = job.tenant;
  c.attempt = job.attempt;
  EMBODY_ASSIGN_OR_RETURN(spec, LaunchSpecFor(uow, job));
  c.spec = std::move(spec);
  EMBODY_ASSIGN_OR_RETURN(logs, uow.logs().ForJob(job.id));
  for (const LogRecord& l : logs) {
    if (l.attempt == job.attempt) c.log_bytes[l.rank] = l.bytes;
  }
  return c;
}

// Whether the agent lists `attempt` of job `job_id` among those it holds (launches, or worker
// assignments).
bool Holds(const std::vector<api::LaunchAck>& held, int64_t job_id, int attempt) {
  for (const api::LaunchAck& l : held) {
    if (l.job_id == job_id && l.attempt == attempt) return true;
  }
  return false;
}
bool Holds(const api::HeartbeatRequest& req, int64_t job_id, int attempt) {
  return Holds(req.launched, job_id, attempt);
}
bool HoldsEarlierAttempt(const std::vector<api::LaunchAck>& held, int64_t job_id, int attempt) {
  for (const api::LaunchAck& l : held) {
    if (l.job_id == job_id && l.attempt < attempt) return true;
  }
  return false;
}


// Whether job `job_id` exists and its latest placement includes `node_id`: events and logs are
// kept only from where the job ran.
bool RanHere(const std::map<int64_t, JobRecord>& jobs,
             const std::map<int64_t, std::vector<AllocationRecord>>& placements, int64_t job_id,
             int64_t node_id) {
  if (!jobs.count(job_id)) return false;
  auto p = placements.find(job_id);
  return p != placements.end() && HasAllocationOn(p->second, node_id, false);
}
}  // namespace

Status NodeService::StoreEvents(UnitOfWork& uow, int64_t node_id, const api::HeartbeatRequest& req,
                                const HeartbeatReads& r, int64_t now,
                                std::map<std::string, uint64_t>* dropped) {
  // The last step event of each job in this heartbeat is stored even when the thinning policy
  // (metrics_history.h) does not keep its step: it is the job's latest step until the next one.
  std::map<int64_t, size_t> last_step;
  for (size_t i = 0; i < req.events.size(); ++i) {
    const api::JobEventReport& e = req.events[i];
    if (e.type == "step" && StepOf(e.data)) last_step[e.job_id] = i;
  }
  std::set<int64_t> refused_logged;
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
    if (!RanHere(r.jobs, r.placements, e.job_id, node_id)) {
      // Not this node's job (or none at all): dropped, nothing stored.
      if (refused_logged.insert(e.job_id).second) {
        common::LogWarn("events refused: job not placed on this node",
                        {{"job_id", std::to_string(e.job_id)}, {"node_id", std::to_string(node_id)}});
      }
      continue;
    }
    if (e.type == PlanWatch::kDeviationEvent || IsLaunchPhaseEvent(e.type)) {
      // The server's own verdict (plan_watch.h): a job cannot write it.
      ++(*dropped)["reserved_type"];
      continue;
    }
    const int64_t t = e.time_ms > 0 ? e.time_ms : now;
    if (auto step = e.type == "step" ? StepOf(e.data) : std::nullopt) {
      if (provisional_dropped.insert(e.job_id).second) {
        EMBODY_RETURN_IF_ERROR(uow.events().DropProvisionalSteps(e.job_id));
      }
      // The plan's step time goes with the measured one: the server's figure, never the job's.
      std::optional<double> predicted;
      if (plan_watch_ != nullptr && e.data.is_object()) {
        int ranks = 0;
        for (const AllocationRecord& a : r.placements.at(e.job_id)) ranks += a.ranks;
        std::optional<double> measured;
        if (auto it = e.data.find("step_seconds"); it != e.data.end() && it->is_number()) {
          measured = it->get<double>();
        }
        PlanWatch::Verdict v = plan_watch_->Observe(r.jobs.at(e.job_id), ranks, *step, measured);
        predicted = v.predicted_step_seconds;
        if (v.deviation) {
          common::LogWarn("job far off its plan", {{"job_id", std::to_string(e.job_id)},
                                                   {"deviation", v.deviation->dump()}});
          EMBODY_ASSIGN_OR_RETURN(
              id, uow.events().Append(e.job_id, t, PlanWatch::kDeviationEvent, *v.deviation));
          (void)id;
        }
      }
      // The event is copied only where that figure changes it.
      const nlohmann::json* data = &e.data;
      nlohmann::json planned;
      if (predicted || (e.data.is_object() && e.data.contains("predicted_step_seconds"))) {
        planned = e.data;
        planned.erase("predicted_step_seconds");
        if (predicted) planned["predicted_step_seconds"] = *predicted;
        data = &planned;
      }
      const bool keep = KeepStep(*step);
      if (keep || last_step[e.job_id] == i) {
        EMBODY_ASSIGN_OR_RETURN(id, uow.events().AppendStep(e.job_id, t, *step, *data, !keep));
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
    if (e.type == "eval") EMBODY_RETURN_IF_ERROR(RecordEvaluationEvent(uow, e.job_id, e.data, t));
  }
  return Status::Ok();
}

Status NodeService::StoreLogs(UnitOfWork& uow, int64_t node_id, const api::HeartbeatRequest& req,
                              const HeartbeatReads& r) {
  std::set<int64_t> refused_logged;
  for (api::LogChunk chunk : req.logs) {
    if (chunk.offset < 0 || chunk.rank < -1 || chunk.rank > 1'000'000) continue;
    if (!RanHere(r.jobs, r.placements, chunk.job_id, node_id)) {
      if (refused_logged.insert(chunk.job_id).second) {
        common::LogWarn("logs refused: job not placed on this node",
                        {{"job_id", std::to_string(chunk.job_id)},
                         {"node_id", std::to_string(node_id)}});
      }
      continue;
    }
    // An earlier attempt's last bytes may come late (from the same node, when the job restarted
    // there); an attempt the job has not reached is no attempt of it.
    const int attempt = r.jobs.at(chunk.job_id).attempt;
    if (chunk.attempt < 0) chunk.attempt = attempt;
    if (chunk.attempt > attempt) continue;
    EMBODY_ASSIGN_OR_RETURN(size, log_files_.Append(chunk));
    EMBODY_RETURN_IF_ERROR(uow.logs().Upsert(
        chunk.job_id,
        {chunk.rank, log_files_.PathFor(chunk.job_id, chunk.attempt, chunk.rank), size,
         chunk.attempt}));
  }
  return Status::Ok();
}

Status NodeService::AcknowledgeLaunches(UnitOfWork& uow, int64_t node_id,
                                        const api::HeartbeatRequest& req, HeartbeatReads& r) {
  // A job the agent reports running or ended was launched there, whatever the agent's age.
  std::set<int64_t> reported(req.running.begin(), req.running.end());
  for (const api::FinishedJob& f : req.finished) reported.insert(f.job_id);
  std::map<int64_t, std::vector<int>> held;  // job -> attempts the agent holds
  for (const api::LaunchAck& l : req.launched) held[l.job_id].push_back(l.attempt);
  std::vector<int64_t> acked_jobs;
  for (AllocationRecord& a : r.mine) {
    if (!a.is_head || a.launched) continue;
    // `running` and `finished` name no attempt: an agent that lists its launches is believed only
    // for the attempt it lists, or a job it holds from an earlier attempt (one it reports lost
    // after a restart) would acknowledge a launch of the next attempt it never got.
    bool acked = !req.has_launched && reported.count(a.job_id) > 0;
    if (!acked) {
      auto h = held.find(a.job_id);
      if (h == held.end()) continue;
      // Only the attempt this allocation is for: an agent still holding an earlier attempt of
      // the job has not got this one.
      auto job = r.jobs.find(a.job_id);
      if (job == r.jobs.end()) continue;
      acked = std::find(h->second.begin(), h->second.end(), job->second.attempt) !=
              h->second.end();
    }
    if (!acked) continue;
    acked_jobs.push_back(a.job_id);
    a.launched = true;
  }
  return uow.allocations().MarkLaunchedMany(acked_jobs, node_id);
}

Status NodeService::ApplyReports(UnitOfWork& uow, int64_t node_id, const std::string& node_name,
                                 const api::HeartbeatRequest& req, HeartbeatReads& r,
                                 int64_t now) {
  const std::string actor = "agent/" + node_name;
  // Only jobs LockChanging locked (and so found in r.live when they hold allocations) move.
  auto live_here = [&r, node_id](int64_t id, bool head) {
    auto l = r.live.find(id);
    return l != r.live.end() && HasAllocationOn(l->second, node_id, head);
  };
  for (int64_t id : req.running) {
    auto job = r.jobs.find(id);
    if (job == r.jobs.end() || job->second.state != JobState::kScheduled) continue;
    if (!live_here(id, false)) continue;
    // Running is this attempt's only when the agent holds this attempt's launch (see above).
    if (req.has_launched && !Holds(req, id, job->second.attempt)) continue;
    EMBODY_RETURN_IF_ERROR(Transition(uow, job->second, JobState::kRunning, "", actor, now));
    if (hand_over_) hand_over_->Started(NodesOf(r.live, id), job->second.created_ms, now);
  }
  for (const api::FinishedJob& f : req.finished) {
    auto it = r.jobs.find(f.job_id);
    if (it == r.jobs.end()) continue;
    JobRecord* job = &it->second;
    // Only the head's report counts, and only for the attempt that still holds this node; a
    // report repeated after the job ended finds no allocation and is ignored, and the end of an
    // earlier attempt (a node that ran it while cut off) is not the end of this one.
    if (!live_here(f.job_id, true)) continue;
    if (f.attempt >= 0 && f.attempt != job->attempt) continue;
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
      // Its agent restarted under it and stopped what was left (agent/jobs/job_record.h): the job
      // did not fail, its node lost it. It restarts as after a node loss.
      if (reason.empty()) reason = "lost by node " + node_name;
      if (hand_over_) hand_over_->Freed(NodesOf(r.live, f.job_id), now);
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
    // Where this attempt's launch spent its time, kept with the end that closes it.
    auto sent = r.launches_sent.find(f.job_id);
    LaunchPhases phases = PhasesAtEnd(
        *job, sent == r.launches_sent.end() ? std::nullopt : std::optional(sent->second), f, now);
    if (phases.node.empty()) phases.node = node_name;
    EMBODY_RETURN_IF_ERROR(Transition(uow, *job, to, reason, actor, now));
    EMBODY_ASSIGN_OR_RETURN(
        phases_id, uow.events().Append(f.job_id, now, kLaunchPhasesEvent, ToStoredJson(phases)));
    (void)phases_id;
    r.ended.push_back(std::move(phases));
    if (hand_over_) hand_over_->Freed(NodesOf(r.live, f.job_id), now);
    r.live.erase(f.job_id);  // released or forgotten: no command for it below
  }
  return Status::Ok();
}

Result<api::HeartbeatResponse> NodeService::Commands(UnitOfWork& uow, int64_t node_id,
                                                     const std::string& node_name,
                                                     const api::HeartbeatRequest& req,
                                                     HeartbeatReads& r, int64_t now,
                                                     uint64_t* lost) {
  api::HeartbeatResponse reply;
  std::vector<int64_t> sent;  // launches this reply carries
  std::vector<EventRecord> first_sent;  // ... handed out for the first time (launch_phases.h)
  for (const AllocationRecord& a : r.mine) {
    auto it = r.jobs.find(a.job_id);
    if (it == r.jobs.end()) continue;
    JobRecord* job = &it->second;
    // A launch, a lost launch or an end before launch writes: LockChanging locked those jobs
    // and read their allocations again; a job no longer holding this node gets nothing.
    const bool launch = job->state == JobState::kScheduled && a.is_head && !a.launched;
    if (launch && !r.live.count(a.job_id)) continue;
    if (launch && a.launch_sends >= kLaunchSendsBeforeLost) {
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
    if (launch) {
      EMBODY_ASSIGN_OR_RETURN(c, JobCommand(uow, api::Command::Type::kLaunch, *job));
      for (const AllocationRecord& h : r.live[a.job_id]) {
        c.hosts.push_back({h.node_id, h.node_name, h.node_address, h.ranks, h.node_agent_url});
      }
      c.job_token = a.job_token;
      // A restarted job continues from where its last attempt got to.
      EMBODY_ASSIGN_OR_RETURN(ckpt, uow.events().LatestCheckpoint(job->id));
      if (ckpt) c.resume_from = ckpt->path;
      // And the checkpoint any node can fetch: its latest upload, or what it starts from.
      EMBODY_ASSIGN_OR_RETURN(blob, ResumeCheckpointFor(uow, *job));
      c.resume_checkpoint = blob;
      // Not yet launched: only acknowledged. Until then every reply carries it again, so a reply
      // lost to a timeout loses nothing; the agent takes a repeat as a no-op.
      reply.commands.push_back(std::move(c));
      // A node that still holds an earlier attempt of the job (told to stop it: it was placed
      // back there) takes this one when that ends, which its kill grace may make longer than
      // kLaunchSendsBeforeLost heartbeats: it is not losing the launch, so those replies are not
      // counted, and the launch counts as sent from the first that it can take.
      if (req.has_launched && HoldsEarlierAttempt(req.launched, a.job_id, job->attempt)) continue;
      sent.push_back(a.job_id);
      if (a.launch_sends == 0) {
        first_sent.push_back({0, a.job_id, now, kLaunchSentEvent, LaunchSentData(*job, node_name)});
      }
    } else if (!a.is_head && !a.job_token.empty() &&
               (job->state == JobState::kScheduled || job->state == JobState::kRunning)) {
      // A node that runs part of the job without being its head: it starts Open MPI's daemon
      // when the head's `embody-agent rsh` asks with the job's token (docs/multinode.md). Sent in
      // every reply while the job lives: the agent takes the set as its whole assignment list.
      // Short once the agent holds this attempt in full: nothing of the job is read again.
      if (Holds(req.workers, job->id, job->attempt)) {
        api::Command c;
        c.type = api::Command::Type::kWorker;
        c.job_id = job->id;
        c.attempt = job->attempt;
        c.held = true;
        reply.commands.push_back(std::move(c));
        continue;
      }
      EMBODY_ASSIGN_OR_RETURN(c, JobCommand(uow, api::Command::Type::kWorker, *job));
      c.job_token_sha256 = common::Sha256Hex(a.job_token);
      c.hosts.push_back({a.node_id, a.node_name, a.node_address, a.ranks, a.node_agent_url});
      // What the job's processes there may reach (agent/sandbox/job_network.h): its nodes. One
      // read per attempt: the full form goes out until the agent holds it.
      EMBODY_ASSIGN_OR_RETURN(placement, uow.allocations().ForJob(job->id));
      for (const AllocationRecord& p : placement) c.peers.push_back(p.node_address);
      reply.commands.push_back(std::move(c));
    } else if (job->state == JobState::kCancelling || job->state == JobState::kRestarting) {
      if (a.is_head && !LaunchSent(a)) {
        if (!r.live.count(a.job_id)) continue;  // moved on since it was read
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
  // Fencing: a job the agent runs that holds no slot here any more (requeued elsewhere while
  // this node was DOWN, or ended) is told to stop. The agent then reports it ended, which finds
  // no allocation and changes nothing.
  std::set<int64_t> placed_here;
  for (const AllocationRecord& a : r.mine) placed_here.insert(a.job_id);
  // A job placed here again after a requeue while the node still runs an earlier attempt of it
  // (the agent lists the attempt it holds) is stale the same way: its end is reported with its
  // attempt and changes nothing, and the new attempt's launch, which the agent leaves until the
  // old one is gone, then starts.
  std::map<int64_t, int> held_attempt;
  for (const api::LaunchAck& l : req.launched) held_attempt[l.job_id] = l.attempt;
  for (int64_t id : req.running) {
    std::string why;
    if (!placed_here.count(id)) {
      why = "holds no slot here";
    } else if (auto h = held_attempt.find(id); h != held_attempt.end()) {
      auto j = r.jobs.find(id);
      if (j != r.jobs.end() && h->second < j->second.attempt) {
        why = "attempt " + std::to_string(h->second) + " of " + std::to_string(j->second.attempt);
      }
    }
    if (why.empty()) continue;
    common::LogWarn("stale job on a node told to stop",
                    {{"job", std::to_string(id)}, {"node", node_name}, {"why", why}});
    api::Command c;
    c.type = api::Command::Type::kKill;
    c.job_id = id;
    reply.commands.push_back(std::move(c));
  }
  EMBODY_RETURN_IF_ERROR(uow.allocations().CountLaunchesSent(sent, node_id));
  if (!first_sent.empty()) EMBODY_RETURN_IF_ERROR(uow.events().AppendMany(first_sent));
  return reply;
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
