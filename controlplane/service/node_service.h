// Nodes and their agents: registration, the heartbeat (the agent's whole channel to the server),
// and the nodes listing.
//
// A heartbeat is one short transaction: record liveness, store the job events and log bytes the
// agent forwards, advance job states from what the agent reports (running, finished), and answer
// with launch commands for scheduled jobs whose head is this node and kill commands for jobs being
// cancelled. A launch is repeated in every reply until the agent acknowledges it (it lists the
// launches it holds, or reports the job running or ended); one never acknowledged after
// kLaunchSendsBeforeLost replies is requeued as after a node loss. Everything in it is idempotent, because agents resend a heartbeat whose
// reply they did not get. One job's bad event (api/job_event_check.h) is dropped alone with its
// reason, never failing the heartbeat: a job must not be able to take its node DOWN.
//
// Its cost does not grow with the jobs on the node: the node's allocations and every job the
// heartbeat names are read in one statement each, acknowledgements and launch counts written in
// one each, and only jobs it moves (a report or a command changes them) are row-locked, again in
// one statement. What grows is per event, per log chunk and per state change, not per job held.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/agent_protocol.h"
#include "api/v1/node.h"
#include "controlplane/service/hand_over.h"
#include "controlplane/service/jobs_service.h"
#include "controlplane/service/launch_phases.h"
#include "controlplane/service/log_files.h"
#include "controlplane/service/node_heard.h"
#include "controlplane/service/node_waiters.h"
#include "controlplane/service/plan_watch.h"
#include "controlplane/service/store.h"

namespace controlplane::service {

// What a NodeService tells or consults besides its store, fixed when it is built. Every field is
// optional: the default leaves that part out. Pointers must outlive the service.
struct NodeServiceHooks {
  // Where held heartbeats wait; null: none is held, every heartbeat is answered at once.
  NodeWaiters* waiters = nullptr;
  // Wakes the scheduler for freed capacity and returns the number of the cycle that will see it
  // (SchedulerLoop::WakeForCapacity), in place of `wake`, for heartbeats that report ended jobs:
  // such a heartbeat, when it asks to wait (wait_ms) and `waiters` is set, is answered once that
  // cycle is over, so a job placed onto the freed slots goes out in its reply rather than in the
  // agent's next heartbeat. Empty: `wake` is called and the heartbeat answered at once.
  std::function<uint64_t()> wake_for_pass = nullptr;
  // Records each authenticated heartbeat's arrival, for the scheduler's DOWN rule; null: none.
  NodeHeard* heard = nullptr;
  // Compares train jobs' step times with their plan (plan_watch.h); null: none is compared.
  PlanWatch* plan_watch = nullptr;
  // Told every job end and start on nodes (hand_over.h); null: none is told.
  HandOverClock* hand_over = nullptr;
  // Called, after its heartbeat committed, with the record of each attempt whose end it stored
  // (launch_phases.h; the server's embody_job_launch_phase_seconds). Empty: none is called.
  std::function<void(const LaunchPhases&)> on_launch_phases = nullptr;
};

class NodeService {
 public:
  // `wake`: a scheduling cycle soon, for freed capacity (a node registered, undrained or came
  // back, a job ended when `hooks.wake_for_pass` is empty); null: none is woken.
  NodeService(Database& db, const LogFiles& log_files, int heartbeat_interval_ms, Clock now,
              std::function<void()> wake, NodeServiceHooks hooks = {})
      : db_(db), log_files_(log_files), heartbeat_interval_ms_(heartbeat_interval_ms),
        now_(std::move(now)), wake_(std::move(wake)), hooks_(std::move(hooks)) {}

  Result<api::RegisterResponse> Register(const Principal& p, const api::RegisterRequest& req);
  // Revokes the node's credential (cluster-admin): its agent is refused from then on, the node
  // goes DOWN when silent, and the join token may register its name again.
  Result<api::v1::Node> Reset(const Principal& p, int64_t node_id);
  // Answers at once, unless the request asks to wait (HeartbeatRequest::wait_ms), carries no
  // report that must not be resent, gets no command, and NodeServiceHooks::waiters has room: then
  // it is held until a command exists for the node or the wait (at most one heartbeat interval)
  // is over, and answered from a fresh read.
  Result<api::HeartbeatResponse> Heartbeat(const Principal& p, int64_t node_id,
                                           const api::HeartbeatRequest& req);
  // Every node. Names no tenant and no job.
  Result<api::v1::NodeList> List(const Principal& p);
  // POST /v1/nodes/{id}/drain and /undrain: a draining node takes no new jobs; what runs there
  // runs on. Cluster-admin only.
  Result<api::v1::Node> SetDraining(const Principal& p, int64_t node_id, bool draining);
  // Prometheus service discovery (scrape_targets.h). Cluster-admin only: it names every node
  // and where its agent listens. `server_address` is host:port of this server.
  Result<nlohmann::json> ScrapeTargets(const Principal& p, const std::string& server_address,
                                       bool server_tls = false);
  // Job events dropped from committed heartbeats since start, by api::EventRejection reason
  // (embody_heartbeat_events_dropped_total).
  std::map<std::string, uint64_t> EventsDropped() const;
  // Launches requeued because their head never acknowledged them (kLaunchSendsBeforeLost).
  uint64_t LaunchesLost() const;

  // A launch handed out in this many heartbeat replies and never acknowledged was lost by its
  // node: the job goes back to the queue as after a node loss.
  static constexpr int kLaunchSendsBeforeLost = 10;
  // The most a heartbeat that reported ends waits for its scheduling pass: a cycle is
  // milliseconds; one slower than this (a long queue, a slow database) leaves the launch to the
  // agent's next heartbeat, as without the wait, rather than delaying the node's next report.
  static constexpr int kPassWaitMs = 200;

 private:
  // One heartbeat's transaction, never held. `pass` (optional): the scheduler cycle its
  // reported ends woke (NodeServiceHooks::wake_for_pass), 0 when it woke none.
  Result<api::HeartbeatResponse> Beat(const Principal& p, int64_t node_id,
                                      const api::HeartbeatRequest& req, uint64_t* pass = nullptr);

  // What a heartbeat reads once, in a fixed number of statements whatever the number of jobs
  // on the node, and every step of it then shares.
  struct HeartbeatReads {
    std::vector<AllocationRecord> mine;  // the node's live allocations
    std::map<int64_t, JobRecord> jobs;   // every job the heartbeat names or the node holds
    // Where each job named by an event or log chunk ran (PlacementForJobs).
    std::map<int64_t, std::vector<AllocationRecord>> placements;
    // Live allocations of the jobs this heartbeat changes, read after they were locked.
    std::map<int64_t, std::vector<AllocationRecord>> live;
    // The latest launch_sent event of each job reported finished (launch_phases.h).
    std::map<int64_t, EventRecord> launches_sent;
    // The launch records of the ends this heartbeat stores, observed once it committed.
    std::vector<LaunchPhases> ended;
    // Ends reported and not taken yet (HeartbeatResponse::deferred).
    std::vector<int64_t> deferred;
  };

  Result<HeartbeatReads> Read(UnitOfWork& uow, int64_t node_id, const api::HeartbeatRequest& req);
  // Locks the jobs this heartbeat may write (a report or a command moves them), in one
  // statement, and reloads them and their allocations under the lock. Jobs it only reads stay
  // unlocked: a steady heartbeat of running jobs takes no row lock on them.
  Status LockChanging(UnitOfWork& uow, const api::HeartbeatRequest& req, HeartbeatReads& r);
  // Events and logs are kept only for jobs whose latest placement includes the reporting node.
  // An event api::CheckJobEvent refuses is dropped alone, counted in `dropped` by reason.
  Status StoreEvents(UnitOfWork& uow, int64_t node_id, const api::HeartbeatRequest& req,
                     const HeartbeatReads& r, int64_t now,
                     std::map<std::string, uint64_t>* dropped);
  Status StoreLogs(UnitOfWork& uow, int64_t node_id, const api::HeartbeatRequest& req,
                   const HeartbeatReads& r);
  Status ApplyReports(UnitOfWork& uow, int64_t node_id, const std::string& node_name,
                      const api::HeartbeatRequest& req, HeartbeatReads& r, int64_t now);
  // Marks the head allocations in `r.mine` whose launch the agent acknowledged
  // (HeartbeatRequest::launched for the job's current attempt, or the job reported running or
  // ended), in one statement.
  Status AcknowledgeLaunches(UnitOfWork& uow, int64_t node_id, const api::HeartbeatRequest& req,
                             HeartbeatReads& r);
  // Whether the failure of `job`, reported by its head `node_id`, waits for the job's other
  // nodes (HeartbeatResponse::deferred): until each has been heard since the end was first
  // reported, at most kEndWaitIntervals heartbeat intervals.
  Result<bool> AwaitsPeers(UnitOfWork& uow, int64_t node_id, const JobRecord& job,
                           const std::vector<AllocationRecord>& live, int64_t now);
  // Adds the launches it gives up on to `*lost`.
  Result<api::HeartbeatResponse> Commands(UnitOfWork& uow, int64_t node_id,
                                          const std::string& node_name,
                                          const api::HeartbeatRequest& req, HeartbeatReads& r,
                                          int64_t now, uint64_t* lost);

  Database& db_;
  const LogFiles& log_files_;
  const int heartbeat_interval_ms_;
  Clock now_;
  std::function<void()> wake_;
  const NodeServiceHooks hooks_;
  mutable std::mutex dropped_mu_;
  std::map<std::string, uint64_t> events_dropped_;
  uint64_t launches_lost_ = 0;
  // When each held failure (job, attempt) was first reported (AwaitsPeers).
  std::mutex ends_mu_;
  std::map<std::pair<int64_t, int>, int64_t> ends_waiting_;
};

// What the API shows of node `n` with `slots_used` of its slots held. Its gpus and isolation are
// read back from the JSON the store keeps; one that is not what registration wrote is internal.
Result<api::v1::Node> NodeView(const NodeRecord& n, int slots_used);

// permission_denied unless `p` is the credential of node `node_id`.
Status RequireNode(const Principal& p, int64_t node_id);

}  // namespace controlplane::service
