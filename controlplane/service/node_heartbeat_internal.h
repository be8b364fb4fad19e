// What the parts of the heartbeat (node_heartbeat.cc, node_heartbeat_reports.cc,
// node_heartbeat_commands.cc) share: whether the agent says it holds an attempt of a job. Not
// part of the service's interface; include node_service.h.
#pragma once

#include <cstdint>
#include <vector>

#include "api/agent_protocol.h"

namespace controlplane::service::node_heartbeat_internal {

// Whether the agent lists `attempt` of job `job_id` among those it holds (launches, or worker
// assignments).
inline bool Holds(const std::vector<api::LaunchAck>& held, int64_t job_id, int attempt) {
  for (const api::LaunchAck& l : held) {
    if (l.job_id == job_id && l.attempt == attempt) return true;
  }
  return false;
}
inline bool Holds(const api::HeartbeatRequest& req, int64_t job_id, int attempt) {
  return Holds(req.launched, job_id, attempt);
}

}  // namespace controlplane::service::node_heartbeat_internal
