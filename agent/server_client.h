// The agent's channel to embody-server: register and heartbeat, as in api/agent_protocol.h.
//
// ServerChannel is an interface only so the heartbeat loop can be tested against a fake; the
// real one is HttpServerChannel. HTTP outcomes map onto Status codes the loop acts on:
// 404 -> not_found (the server no longer knows this node: register again), a connection failure
// or 5xx -> unavailable (retry with backoff), 401/403 -> unauthenticated/permission_denied.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "agent/node_credential.h"
#include "api/agent_protocol.h"
#include "common/status.h"

namespace httplib {
class Client;
}

namespace agent {

class ServerChannel {
 public:
  virtual ~ServerChannel() = default;
  virtual common::Result<api::RegisterResponse> Register(const api::RegisterRequest& req) = 0;
  virtual common::Result<api::HeartbeatResponse> Heartbeat(int64_t node_id,
                                                           const api::HeartbeatRequest& req) = 0;
};

class HttpServerChannel : public ServerChannel {
 public:
  // `server_url` like "http://127.0.0.1:8080"; every call carries `credential`'s current bearer
  // token. `credential` must outlive the channel.
  HttpServerChannel(const std::string& server_url, const NodeCredential* credential);
  ~HttpServerChannel() override;

  common::Result<api::RegisterResponse> Register(const api::RegisterRequest& req) override;
  common::Result<api::HeartbeatResponse> Heartbeat(int64_t node_id,
                                                   const api::HeartbeatRequest& req) override;

 private:
  common::Result<nlohmann::json> PostJson(const std::string& path, const nlohmann::json& body);

  const NodeCredential* const credential_;
  std::mutex mu_;
  std::unique_ptr<httplib::Client> client_;
};

}  // namespace agent
