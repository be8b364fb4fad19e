#include "cli/api_client.h"

#include <httplib.h>

namespace cli {

using common::Code;
using common::Result;
using common::Status;
using nlohmann::json;

namespace {
// For answers without a JSON error body (a proxy in the way, an old server).
Code CodeForHttp(int status) {
  switch (status) {
    case 400: return Code::kInvalidArgument;
    case 401: return Code::kUnauthenticated;
    case 403: return Code::kPermissionDenied;
    case 404: return Code::kNotFound;
    case 409: return Code::kFailedPrecondition;
    case 412: return Code::kPreconditionFailed;
    case 422: return Code::kUnprocessable;
    case 429: return Code::kResourceExhausted;
    case 503: return Code::kUnavailable;
    default: return Code::kInternal;
  }
}
}  // namespace

Status DecodeError(int http_status, const std::string& body) {
  json j = json::parse(body, nullptr, false);
  if (!j.is_discarded() && j.is_object() && j.contains("error") && j["error"].is_object()) {
    const json& e = j["error"];
    auto code = e.contains("code") && e["code"].is_string()
                    ? common::CodeFromName(e["code"].get<std::string>())
                    : std::nullopt;
    const std::string message =
        e.contains("message") && e["message"].is_string() ? e["message"].get<std::string>()
                                                          : "HTTP " + std::to_string(http_status);
    const std::string field =
        e.contains("field") && e["field"].is_string() ? e["field"].get<std::string>() : "";
    return Status(code && *code != Code::kOk ? *code : CodeForHttp(http_status), message, field);
  }
  return Status(CodeForHttp(http_status),
                "HTTP " + std::to_string(http_status) + ": " + body.substr(0, 200));
}

ApiClient::ApiClient(Config config) : config_(std::move(config)) {
  http_ = std::make_unique<httplib::Client>(config_.url);
  http_->set_connection_timeout(5, 0);
  http_->set_read_timeout(60, 0);
  http_->set_bearer_token_auth(config_.token.c_str());
}

ApiClient::~ApiClient() = default;

Status ApiClient::Unreachable(int error) const {
  return common::Unavailable("cannot reach " + config_.url + " (" +
                             httplib::to_string(static_cast<httplib::Error>(error)) + ")");
}

Result<Reply> ApiClient::Send(const std::string& method, const std::string& path,
                              const std::string& body, const Headers& headers) {
  httplib::Headers h(headers.begin(), headers.end());
  const char* type = "application/json";
  httplib::Result res = method == "GET"     ? http_->Get(path.c_str(), h)
                        : method == "PATCH" ? http_->Patch(path.c_str(), h, body, type)
                        : method == "DELETE" ? http_->Delete(path.c_str(), h, body, type)
                                             : http_->Post(path.c_str(), h, body, type);
  if (!res) return Unreachable(static_cast<int>(res.error()));
  if (res->status < 200 || res->status >= 300) return DecodeError(res->status, res->body);
  Reply r;
  r.body = json::parse(res->body, nullptr, false);
  if (r.body.is_discarded()) return common::Internal("server sent a body that is not JSON");
  r.etag = res->get_header_value("ETag");
  return r;
}

Result<json> ApiClient::Get(const std::string& path) {
  auto r = Send("GET", path);
  if (!r.ok()) return r.status();
  return std::move(r->body);
}

Result<json> ApiClient::Post(const std::string& path, const std::string& body) {
  auto r = Send("POST", path, body);
  if (!r.ok()) return r.status();
  return std::move(r->body);
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
  if (!res) return Unreachable(static_cast<int>(res.error()));
  if (status < 200 || status >= 300) return DecodeError(status, error_body);
  return Status::Ok();
}

}  // namespace cli
