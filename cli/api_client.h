// The CLI's client for the Embody REST API: JSON in and out over the shared HTTP client
// (common/http/client.h: bearer token, timeouts, X-Request-Id), errors from the server's
// {"error":{...}} body decoded into a Status with the server's code, message and field.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/config.h"
#include "common/http/client.h"
#include "common/status.h"

namespace cli {

using Headers = common::http::HeaderList;

struct Reply {
  nlohmann::json body;
  std::string etag;  // the ETag header, when the server sent one (tenants carry their version)
};

class ApiClient {
 public:
  explicit ApiClient(Config config);
  ~ApiClient();

  // `method` is GET, POST, PUT, PATCH or DELETE; `body` is sent as `content_type`.
  common::Result<Reply> Send(const std::string& method, const std::string& path,
                             const std::string& body = "", const Headers& headers = {},
                             const std::string& content_type = "application/json");
  common::Result<nlohmann::json> Get(const std::string& path);
  common::Result<nlohmann::json> Post(const std::string& path, const std::string& body);
  // GET of raw bytes (a dataset file, with a Range header); a non-2xx answer is its Status.
  common::Result<std::string> GetBytes(const std::string& path, const Headers& headers);
  // Streams a text response to `sink` as it arrives (logs with follow=1).
  common::Status Stream(const std::string& path, const std::function<void(const char*, size_t)>& sink);
  // The connection itself, for blob transfers (common/http/blob_client.h); the bad URL's Status
  // when there is none.
  common::Result<common::http::Client*> Http();

 private:
  Config config_;
  // Null when config_.url is not a usable URL; every call then returns `bad_url_`.
  std::unique_ptr<common::http::Client> http_;
  common::Status bad_url_;
};

}  // namespace cli
