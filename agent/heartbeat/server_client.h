// The agent's channel to embody-server: register and heartbeat, as in api/agent_protocol.h.
//
// ServerChannel is an interface only so the heartbeat loop can be tested against a fake; the
// real one is HttpServerChannel, over the shared client (common/http/client.h). The server's
// errors are decoded into its Status (common/http/status_http.h), and the loop acts on the code:
// not_found (the server no longer knows this node: register again), unauthenticated (the node
// credential was refused: fall back to the join token), anything else (no answer is unavailable)
// -> retry at the next beat. Every message names the call's request id, which the server logs.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "agent/heartbeat/node_credential.h"
#include "api/agent_protocol.h"
#include "common/http/client.h"
#include "common/status.h"

namespace agent {

class ServerChannel {
 public:
  virtual ~ServerChannel() = default;
  virtual common::Result<api::RegisterResponse> Register(const api::RegisterRequest& req) = 0;
  virtual common::Result<api::HeartbeatResponse> Heartbeat(int64_t node_id,
                                                           const api::HeartbeatRequest& req) = 0;
  // Aborts a heartbeat in flight (one the server holds: api::HeartbeatRequest::wait_ms) from
  // another thread; the aborted call fails. Channels that never hold may do nothing.
  virtual void Interrupt() {}
};

class HttpServerChannel : public ServerChannel {
 public:
  // `server_url` like "http://127.0.0.1:8080"; every call carries `credential`'s current bearer
  // token. `credential` must outlive the channel. `ca_file`: for an https server, the CAs its
  // certificate must chain to ("": the system's). A URL that is not http(s), or a CA file that
  // cannot be read, makes every call fail with invalid_argument (the agent checks both at start).
  HttpServerChannel(const std::string& server_url, const std::string& ca_file,
                    const NodeCredential* credential);
  ~HttpServerChannel() override;

  common::Result<api::RegisterResponse> Register(const api::RegisterRequest& req) override;
  common::Result<api::HeartbeatResponse> Heartbeat(int64_t node_id,
                                                   const api::HeartbeatRequest& req) override;
  void Interrupt() override;

 private:
  common::Result<nlohmann::json> PostJson(const std::string& path, const nlohmann::json& body);

  const NodeCredential* const credential_;
  std::mutex mu_;  // one call at a time, with the token current when it starts
  std::unique_ptr<common::http::Client> client_;
  common::Status bad_url_;
};

}  // namespace agent
