// The reply to a heartbeat, made in its transaction (node_service.h): launches for the
// scheduled jobs this node heads (repeated until acknowledged, given up on after
// kLaunchSendsBeforeLost replies), worker assignments for the jobs it runs a part of, kills for
// jobs being cancelled or preempted, and kills for jobs it runs that no longer hold it.
#include "controlplane/service/node_service.h"

#include <map>
#include <set>

#include "common/crypto.h"
#include "common/log.h"
#include "controlplane/service/checkpoints_service.h"
#include "controlplane/service/dataset_lifecycle.h"
#include "controlplane/service/node_heartbeat_internal.h"
#include "controlplane/service/transitions.h"

namespace controlplane::service {

using api::JobState;
using node_heartbeat_internal::Holds;

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

bool HoldsEarlierAttempt(const std::vector<api::LaunchAck>& held, int64_t job_id, int attempt) {
  for (const api::LaunchAck& l : held) {
    if (l.job_id == job_id && l.attempt < attempt) return true;
  }
  return false;
}
}  // namespace

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

}  // namespace controlplane::service
