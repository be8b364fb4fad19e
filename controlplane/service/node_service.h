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
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/agent_protocol.h"
#include "controlplane/service/jobs_service.h"
#include "controlplane/service/log_files.h"
#include "controlplane/service/store.h"

namespace controlplane::service {

class NodeService {
 public:
  NodeService(Database& db, const LogFiles& log_files, int heartbeat_interval_ms, Clock now,
              std::function<void()> wake)
      : db_(db), log_files_(log_files), heartbeat_interval_ms_(heartbeat_interval_ms),
        now_(std::move(now)), wake_(std::move(wake)) {}

  Result<api::RegisterResponse> Register(const Principal& p, const api::RegisterRequest& req);
  Result<api::HeartbeatResponse> Heartbeat(const Principal& p, int64_t node_id,
                                           const api::HeartbeatRequest& req);
  // {"nodes":[...]} per docs/contracts.md. Names no tenant and no job.
  Result<nlohmann::json> List(const Principal& p);
  // POST /v1/nodes/{id}/drain and /undrain: a draining node takes no new jobs; what runs there
  // runs on. Cluster-admin only.
  Result<nlohmann::json> SetDraining(const Principal& p, int64_t node_id, bool draining);
  // Prometheus service discovery (scrape_targets.h). Cluster-admin only: it names every node
  // and where its agent listens. `server_address` is host:port of this server.
  Result<nlohmann::json> ScrapeTargets(const Principal& p, const std::string& server_address);
  // Job events dropped from committed heartbeats since start, by api::EventRejection reason
  // (embody_heartbeat_events_dropped_total).
  std::map<std::string, uint64_t> EventsDropped() const;
  // Launches requeued because their head never acknowledged them (kLaunchSendsBeforeLost).
  uint64_t LaunchesLost() const;

  // A launch handed out in this many heartbeat replies and never acknowledged was lost by its
  // node: the job goes back to the queue as after a node loss.
  static constexpr int kLaunchSendsBeforeLost = 10;

 private:
  // Events and logs are kept only for jobs whose latest placement includes the reporting node.
  // An event api::CheckJobEvent refuses is dropped alone, counted in `dropped` by reason.
  Status StoreEvents(UnitOfWork& uow, int64_t node_id, const api::HeartbeatRequest& req,
                     int64_t now, std::map<std::string, uint64_t>* dropped);
  Status StoreLogs(UnitOfWork& uow, int64_t node_id, const api::HeartbeatRequest& req);
  Result<bool> RanHere(UnitOfWork& uow, int64_t job_id, int64_t node_id);
  Status ApplyReports(UnitOfWork& uow, int64_t node_id, const std::string& node_name,
                      const api::HeartbeatRequest& req, int64_t now);
  // Marks the head allocations in `mine` whose launch the agent acknowledged (HeartbeatRequest::
  // launched for the job's current attempt, or the job reported running or ended).
  Status AcknowledgeLaunches(UnitOfWork& uow, const api::HeartbeatRequest& req,
                             std::vector<AllocationRecord>& mine);
  // `mine`: the node's allocations, as AcknowledgeLaunches left them. Adds the launches it
  // gives up on to `*lost`.
  Result<api::HeartbeatResponse> Commands(UnitOfWork& uow, const std::string& node_name,
                                          const std::vector<AllocationRecord>& mine, int64_t now,
                                          uint64_t* lost);

  Database& db_;
  const LogFiles& log_files_;
  const int heartbeat_interval_ms_;
  Clock now_;
  std::function<void()> wake_;
  mutable std::mutex dropped_mu_;
  std::map<std::string, uint64_t> events_dropped_;
  uint64_t launches_lost_ = 0;
};

// permission_denied unless `p` is the credential of node `node_id`.
Status RequireNode(const Principal& p, int64_t node_id);

}  // namespace controlplane::service
