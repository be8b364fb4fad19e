#include "agent/heartbeat/server_client.h"

#include "common/request_id.h"

namespace agent {
namespace {

using common::Status;
using nlohmann::json;

// Heartbeats are short and frequent: a server that does not answer within these is treated as
// down for this beat, and the next beat tries again.
constexpr double kConnectTimeoutS = 3;
constexpr double kIoTimeoutS = 15;

}  // namespace

HttpServerChannel::HttpServerChannel(const std::string& server_url, const std::string& ca_file,
                                     const NodeCredential* credential)
    : credential_(credential) {
  auto client = common::http::Client::Create(
      {server_url, kConnectTimeoutS, kIoTimeoutS, kIoTimeoutS, /*bearer_token=*/"", ca_file});
  if (client.ok()) {
    client_ = std::move(*client);
  } else {
    bad_url_ = client.status();
  }
}

HttpServerChannel::~HttpServerChannel() = default;

common::Result<json> HttpServerChannel::PostJson(const std::string& path, const json& body) {
  if (!client_) return bad_url_;
  common::http::Request req;
  req.method = "POST";
  req.path = path;
  // Log bytes are arbitrary; invalid UTF-8 is replaced rather than failing the heartbeat.
  req.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
  // The id lets an operator find this call in the server's log from the agent's.
  req.request_id = common::RequestIdFor("");
  std::lock_guard<std::mutex> lock(mu_);
  client_->SetBearerToken(credential_->Bearer());
  auto res = client_->Call(req);
  if (!res.ok()) {
    const Status& st = res.status();
    if (st.message().find(req.request_id) != std::string::npos) return st;
    return Status(st.code(), "server answered: " + st.message() + " (request " + req.request_id +
                                 ")", st.field());
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

void HttpServerChannel::Interrupt() {
  if (client_) client_->Interrupt();
}

}  // namespace agent
