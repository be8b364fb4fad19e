// A thin HTTP client for the Embody REST API: bearer token, JSON in and out, errors from the
// server's {"error":{...}} body turned into a Status with the server's code, message and field.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/config.h"
#include "common/status.h"

namespace httplib {
class Client;
}

namespace cli {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct Reply {
  nlohmann::json body;
  std::string etag;  // the ETag header, when the server sent one (tenants carry their version)
};

// The Status for an HTTP error answer: the code named in the body when the server sent a JSON
// error, else one derived from the HTTP status.
common::Status DecodeError(int http_status, const std::string& body);

class ApiClient {
 public:
  explicit ApiClient(Config config);
  ~ApiClient();

  // `method` is GET, POST, PATCH or DELETE; `body` is sent as application/json when not empty.
  common::Result<Reply> Send(const std::string& method, const std::string& path,
                             const std::string& body = "", const Headers& headers = {});
  common::Result<nlohmann::json> Get(const std::string& path);
  common::Result<nlohmann::json> Post(const std::string& path, const std::string& body);
  // Streams a text response to `sink` as it arrives (logs with follow=1).
  common::Status Stream(const std::string& path, const std::function<void(const char*, size_t)>& sink);

 private:
  common::Status Unreachable(int error) const;
  Config config_;
  std::unique_ptr<httplib::Client> http_;
};

}  // namespace cli
