#include "cli/api_client.h"

namespace cli {

using common::Result;
using common::Status;
using nlohmann::json;

namespace {
// A request waits at most this long for the server's answer; log streaming waits longer.
constexpr double kReadTimeoutS = 60;
constexpr double kStreamReadTimeoutS = 3600;
}  // namespace

ApiClient::ApiClient(Config config) : config_(std::move(config)) {
  common::http::ClientOptions options;  // connect 5 s, write 60 s: the defaults
  options.base_url = config_.url;
  options.read_timeout_s = kReadTimeoutS;
  options.bearer_token = config_.token;
  options.ca_file = config_.ca_file;
  auto client = common::http::Client::Create(std::move(options));
  if (client.ok()) {
    http_ = std::move(*client);
  } else if (client.status().field() == "ca-file") {
    bad_url_ = common::InvalidArgument(client.status().message(), "EMBODY_CA_FILE");
  } else {
    bad_url_ = common::InvalidArgument("server URL: " + client.status().message(), "EMBODY_URL");
  }
}

ApiClient::~ApiClient() = default;

Result<Reply> ApiClient::Send(const std::string& method, const std::string& path,
                              const std::string& body, const Headers& headers,
                              const std::string& content_type) {
  if (!http_) return bad_url_;
  common::http::Request req;
  req.method = method;
  req.path = path;
  req.body = body;
  req.content_type = content_type;
  req.headers = headers;
  auto res = http_->Call(req);
  if (!res.ok()) return res.status();
  Reply r;
  r.body = json::parse(res->body, nullptr, false);
  if (r.body.is_discarded()) return common::Internal("server sent a body that is not JSON");
  r.etag = res->Header("ETag");
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

Result<std::string> ApiClient::GetBytes(const std::string& path, const Headers& headers) {
  if (!http_) return bad_url_;
  common::http::Request req;
  req.path = path;
  req.headers = headers;
  auto res = http_->Call(req);
  if (!res.ok()) return res.status();
  return std::move(res->body);
}

Result<common::http::Client*> ApiClient::Http() {
  if (!http_) return bad_url_;
  return http_.get();
}

Status ApiClient::Stream(const std::string& path,
                         const std::function<void(const char*, size_t)>& sink) {
  if (!http_) return bad_url_;
  return http_->Stream(path, sink, kStreamReadTimeoutS);
}

}  // namespace cli
