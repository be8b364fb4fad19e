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
  // `server_url` like "http://127.0.0.1:8080"; `token` is the cluster join token. Register
  // trades it for the node's own credential, which every later call uses; when the server
  // refuses that credential (401), the next call registers again with the join token.
  HttpServerChannel(const std::string& server_url, const std::string& token);
  ~HttpServerChannel() override;

  common::Result<api::RegisterResponse> Register(const api::RegisterRequest& req) override;
  common::Result<api::HeartbeatResponse> Heartbeat(int64_t node_id,
                                                   const api::HeartbeatRequest& req) override;

 private:
  common::Result<nlohmann::json> PostJson(const std::string& path, const nlohmann::json& body);

  std::mutex mu_;
  std::unique_ptr<httplib::Client> client_;
  const std::string join_token_;
  std::string node_token_;  // guarded by mu_
};

}  // namespace agent
