// The heartbeat's one transaction and its holding (node_service.h): bounds checked, the node
// touched, what the heartbeat needs read once (Read), the jobs it moves locked (LockChanging),
// then the agent's reports stored and applied (node_heartbeat_reports.cc) and the reply's
// commands made (node_heartbeat_commands.cc); a heartbeat that asks to wait is held here
// (NodeWaiters) until its node has news. Also the counts of what committed heartbeats gave up.
#include "controlplane/service/node_service.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>

namespace controlplane::service {

using api::JobState;

namespace {

// What one heartbeat may carry; anything past it is refused whole (400), nothing stored. One
// job's bad event is not: it is dropped alone (StoreEvents), so no job can fail its node's
// heartbeats.
constexpr size_t kMaxReportsPerHeartbeat = 10'000;
constexpr size_t kMaxLogChunkBytes = 4 * 1024 * 1024;

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

Result<api::HeartbeatResponse> NodeService::Heartbeat(const Principal& p, int64_t node_id,
                                                      const api::HeartbeatRequest& req) {
  // Read before the first transaction: a placement committed after it wakes the wait below.
  uint64_t generation = hooks_.waiters ? hooks_.waiters->Generation(node_id) : 0;
  uint64_t pass = 0;
  EMBODY_ASSIGN_OR_RETURN(reply, Beat(p, node_id, req, &pass));
  // Only a heartbeat that reports nothing is held until a command exists: an agent gives up on
  // such a call when one of its jobs ends (to report it at once), and resends only what is safe
  // to resend. One that reported ends (its agent does not give it up) waits only for the
  // scheduling pass those ends woke, so that the freed slots' next job comes back in its reply.
  const bool holdable = hooks_.waiters && req.wait_ms > 0 && req.finished.empty() &&
                        req.events.empty() && req.logs.empty();
  const bool awaits_pass = hooks_.waiters && req.wait_ms > 0 && pass != 0;
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
      if (hooks_.waiters->WaitForPass(node_id, generation, pass, left) !=
          NodeWaiters::PassWait::kNotified) {
        return reply;
      }
    } else if (!hooks_.waiters->Wait(node_id, generation, left)) {
      return reply;
    }
    generation = hooks_.waiters->Generation(node_id);
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
  if (hooks_.heard) hooks_.heard->Heard(node_id, now_());
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
  reply.deferred = std::move(reads.deferred);
  EMBODY_RETURN_IF_ERROR(uow->Commit());
  if (hooks_.on_launch_phases) {
    for (const LaunchPhases& ended : reads.ended) hooks_.on_launch_phases(ended);
  }
  // And heard when answered: the node's silence is from its reply to its next heartbeat, not
  // from the arrival of a heartbeat that the database held up.
  if (hooks_.heard) hooks_.heard->Heard(node_id, now_());
  // Counted once committed: a heartbeat whose transaction failed gave nothing up.
  if (!dropped.empty() || lost > 0) {
    std::lock_guard<std::mutex> lock(dropped_mu_);
    for (const auto& [reason, n] : dropped) events_dropped_[reason] += n;
    launches_lost_ += lost;
  }
  // Freed slots, or a node back from DOWN: there may be something to place now.
  if (!req.finished.empty() && hooks_.wake_for_pass) {
    const uint64_t woken = hooks_.wake_for_pass();
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

}  // namespace controlplane::service
