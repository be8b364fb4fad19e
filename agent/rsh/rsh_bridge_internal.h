// What the parts of the rsh bridge (rsh_bridge.cc, rsh_daemon_start.cc) share: how a request
// from the head's agent is matched with the job's part on this node and its job token. Not part
// of the bridge's interface; include rsh_bridge.h.
#pragma once

#include <cstdint>
#include <string>

#include "api/agent_protocol.h"
#include "common/crypto.h"
#include "common/status.h"

namespace agent::rsh_bridge_internal {

inline std::string BearerCredential(const std::string& authorization) {
  const std::string kBearer = "Bearer ";
  if (authorization.rfind(kBearer, 0) != 0) return "";
  return authorization.substr(kBearer.size());
}

inline common::Status NoPartHere(int64_t job_id) {
  return common::NotFound("job " + std::to_string(job_id) + " has no part on this node");
}

// Whether `authorization` carries the job token of `worker`'s attempt.
inline common::Status CheckJobToken(const api::Command& worker, const std::string& authorization) {
  const std::string token = BearerCredential(authorization);
  if (token.empty() ||
      !common::ConstantTimeEquals(common::Sha256Hex(token), worker.job_token_sha256)) {
    return common::Status(common::Code::kUnauthenticated, "missing or wrong job token");
  }
  return common::Status::Ok();
}

}  // namespace agent::rsh_bridge_internal
