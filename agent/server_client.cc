#include "agent/server_client.h"

#include <httplib.h>

#include "agent/request_log.h"

namespace agent {
namespace {

using common::Code;
using common::Status;
using nlohmann::json;

Status HttpError(int status, const std::string& body) {
  std::string message = "server answered " + std::to_string(status);
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("error") && j["error"].is_object()) {
    message += ": " + j["error"].value("message", "");
  }
  if (status == 404) return Status(Code::kNotFound, message);
  if (status == 401) return Status(Code::kUnauthenticated, message);
  if (status == 403) return Status(Code::kPermissionDenied, message);
  if (status == 429 || status >= 500) return Status(Code::kUnavailable, message);
  return Status(Code::kInvalidArgument, message);
}

}  // namespace

HttpServerChannel::HttpServerChannel(const std::string& server_url,
                                     const NodeCredential* credential)
    : credential_(credential), client_(std::make_unique<httplib::Client>(server_url)) {
  client_->set_connection_timeout(3, 0);
  client_->set_read_timeout(15, 0);
  client_->set_write_timeout(15, 0);
  client_->set_keep_alive(true);
  client_->set_tcp_nodelay(true);  // else each call can wait ~40 ms (Nagle + delayed ACK)
}

HttpServerChannel::~HttpServerChannel() = default;

common::Result<json> HttpServerChannel::PostJson(const std::string& path, const json& body) {
  // Log bytes are arbitrary; invalid UTF-8 is replaced rather than failing the heartbeat.
  std::string text = body.dump(-1, ' ', false, json::error_handler_t::replace);
  // The id lets an operator find this call in the server's log from the agent's.
  std::string request_id = RequestIdFor("");
  httplib::Headers headers{{kRequestIdHeader, request_id}};
  std::lock_guard<std::mutex> lock(mu_);
  client_->set_bearer_token_auth(credential_->Bearer());
  auto res = client_->Post(path, headers, text, "application/json");
  if (!res) {
    return common::Unavailable("cannot reach server: " + httplib::to_string(res.error()) +
                               " (request " + request_id + ")");
  }
  if (res->status < 200 || res->status >= 300) {
    Status st = HttpError(res->status, res->body);
    return Status(st.code(), st.message() + " (request " + request_id + ")");
  }
  json reply = json::parse(res->body, nullptr, /*allow_exceptions=*/false);
  if (reply.is_discarded()) return common::Unavailable("server sent malformed JSON");
  return reply;
}

common::Result<api::RegisterResponse> HttpServerChannel::Register(const api::RegisterRequest& req) {
  auto reply = PostJson("/v1/agents/register", api::ToJson(req));
  if (!reply.ok()) return reply.status();
  return api::ParseRegisterResponse(*reply);
}

common::Result<api::HeartbeatResponse> HttpServerChannel::Heartbeat(
    int64_t node_id, const api::HeartbeatRequest& req) {
  auto reply = PostJson("/v1/agents/" + std::to_string(node_id) + "/heartbeat", api::ToJson(req));
  if (!reply.ok()) return reply.status();
  return api::ParseHeartbeatResponse(*reply);
}

}  // namespace agent
