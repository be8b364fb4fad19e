#include "cli/api_client.h"

#include <httplib.h>

namespace cli {

using common::Code;
using common::Result;
using common::Status;
using nlohmann::json;

namespace {
Code CodeForHttp(int status) {
  switch (status) {
    case 400: return Code::kInvalidArgument;
    case 401: return Code::kUnauthenticated;
    case 403: return Code::kPermissionDenied;
    case 404: return Code::kNotFound;
    case 409: return Code::kFailedPrecondition;
    case 429: return Code::kResourceExhausted;
    case 503: return Code::kUnavailable;
    default: return Code::kInternal;
  }
}
}  // namespace

ApiClient::ApiClient(Config config) : config_(std::move(config)) {
  http_ = std::make_unique<httplib::Client>(config_.url);
  http_->set_connection_timeout(5, 0);
  http_->set_read_timeout(60, 0);
  http_->set_bearer_token_auth(config_.token.c_str());
}

ApiClient::~ApiClient() = default;

Result<json> ApiClient::Decode(int status, const std::string& body) {
  json j = json::parse(body, nullptr, false);
  if (status >= 200 && status < 300) {
    if (j.is_discarded()) return common::Internal("server sent a body that is not JSON");
    return j;
  }
  if (!j.is_discarded() && j.contains("error") && j["error"].is_object()) {
    const json& e = j["error"];
    return Status(CodeForHttp(status), e.value("message", "error"), e.value("field", ""));
  }
  return Status(CodeForHttp(status), "HTTP " + std::to_string(status) + ": " + body.substr(0, 200));
}

Result<json> ApiClient::Get(const std::string& path) {
  auto res = http_->Get(path.c_str());
  if (!res) {
    return common::Unavailable("cannot reach " + config_.url + " (" +
                               httplib::to_string(res.error()) + ")");
  }
  return Decode(res->status, res->body);
}

Result<json> ApiClient::Post(const std::string& path, const std::string& body) {
  auto res = http_->Post(path.c_str(), body, "application/json");
  if (!res) {
    return common::Unavailable("cannot reach " + config_.url + " (" +
                               httplib::to_string(res.error()) + ")");
  }
  return Decode(res->status, res->body);
}

Status ApiClient::Stream(const std::string& path,
                         const std::function<void(const char*, size_t)>& sink) {
  http_->set_read_timeout(3600, 0);
  int status = 0;
  std::string error_body;
  auto res = http_->Get(
      path.c_str(),
      [&](const httplib::Response& r) {
        status = r.status;
        return true;
      },
      [&](const char* data, size_t n) {
        if (status >= 200 && status < 300) {
          sink(data, n);
        } else {
          error_body.append(data, n);
        }
        return true;
      });
  if (!res) {
    return common::Unavailable("cannot reach " + config_.url + " (" +
                               httplib::to_string(res.error()) + ")");
  }
  if (status < 200 || status >= 300) return Decode(status, error_body).status();
  return Status::Ok();
}

}  // namespace cli
