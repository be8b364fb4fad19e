// What the agent reports in a heartbeat, applied in its transaction (node_service.h): job
// events (checked one by one, step events thinned and compared with the plan, checkpoints,
// datasets and evaluations recorded) and log bytes, kept only from where the job ran; launches
// acknowledged; and the jobs the agent says run or ended moved on.
#include "controlplane/service/node_service.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <set>

#include "api/job_event_check.h"
#include "common/log.h"
#include "controlplane/service/dataset_lifecycle.h"
#include "controlplane/service/evaluations.h"
#include "controlplane/service/metrics_history.h"
#include "controlplane/service/node_heartbeat_internal.h"
#include "controlplane/service/transitions.h"

namespace controlplane::service {

using api::JobState;
using node_heartbeat_internal::Holds;

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

// The agent's reason for an end is kept to this many bytes.
constexpr size_t kMaxReasonBytes = 1024;

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
      if (hooks_.plan_watch != nullptr && e.data.is_object()) {
        int ranks = 0;
        for (const AllocationRecord& a : r.placements.at(e.job_id)) ranks += a.ranks;
        std::optional<double> measured;
        if (auto it = e.data.find("step_seconds"); it != e.data.end() && it->is_number()) {
          measured = it->get<double>();
        }
        PlanWatch::Verdict v =
            hooks_.plan_watch->Observe(r.jobs.at(e.job_id), ranks, *step, measured);
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

// When a node is lost under a job on several nodes, the head's launcher (mpirun, its daemon's
// connection gone) often ends the job before the server has missed a single heartbeat of that
// node; taken at once, the end failed a job that the node-down rule (3 silent intervals,
// SchedulerLoop::MarkLostNodes) restarts a moment later. So the failure waits until every other
// node of the job has been heard since it was first reported (a live node's next heartbeat, at
// most an interval away): a node that is heard again makes it a failure, one that is lost makes
// it a restart, and the head's repeated report then finds no allocation and changes nothing.
// Bounded, so that a server whose scheduler does not run (not the leader) still ends it.
constexpr int64_t kEndWaitIntervals = 6;

Result<bool> NodeService::AwaitsPeers(UnitOfWork& uow, int64_t node_id, const JobRecord& job,
                                      const std::vector<AllocationRecord>& live, int64_t now) {
  const std::pair<int64_t, int> key{job.id, job.attempt};
  const int64_t bound = kEndWaitIntervals * heartbeat_interval_ms_;
  int64_t first = now;
  {
    std::lock_guard<std::mutex> lock(ends_mu_);
    for (auto it = ends_waiting_.begin(); it != ends_waiting_.end();) {
      it = now - it->second > 2 * bound ? ends_waiting_.erase(it) : std::next(it);
    }
    bool peers = false;
    for (const AllocationRecord& a : live) peers = peers || a.node_id != node_id;
    if (!peers) return false;
    first = ends_waiting_.try_emplace(key, now).first->second;
  }
  bool waits = false;
  if (now - first <= bound) {
    for (const AllocationRecord& a : live) {
      if (a.node_id == node_id) continue;
      // The committed time a heartbeat arrived: a heartbeat sent before the node was lost and
      // answered after tells nothing of it afterwards.
      EMBODY_ASSIGN_OR_RETURN(peer, uow.nodes().Get(a.node_id));
      if (peer && peer->last_heartbeat_ms < first) waits = true;
    }
  }
  if (!waits) {
    std::lock_guard<std::mutex> lock(ends_mu_);
    ends_waiting_.erase(key);
  }
  return waits;
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
    if (hooks_.hand_over)
      hooks_.hand_over->Started(NodesOf(r.live, id), job->second.created_ms, now);
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
      if (hooks_.hand_over) hooks_.hand_over->Freed(NodesOf(r.live, f.job_id), now);
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
      if (f.exit_code != 0) {
        auto live = r.live.find(f.job_id);
        EMBODY_ASSIGN_OR_RETURN(waits, AwaitsPeers(uow, node_id, *job, live->second, now));
        if (waits) {
          r.deferred.push_back(f.job_id);
          continue;
        }
      }
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
    if (hooks_.hand_over) hooks_.hand_over->Freed(NodesOf(r.live, f.job_id), now);
    r.live.erase(f.job_id);  // released or forgotten: no command for it below
  }
  return Status::Ok();
}

}  // namespace controlplane::service
