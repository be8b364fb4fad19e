// A thin HTTP client for the Embody REST API: bearer token, JSON in and out, errors from the
// server's {"error":{...}} body turned into a Status whose message a person can act on.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/config.h"
#include "common/status.h"

namespace httplib {
class Client;
}

namespace cli {

class ApiClient {
 public:
  explicit ApiClient(Config config);
  ~ApiClient();

  common::Result<nlohmann::json> Get(const std::string& path);
  common::Result<nlohmann::json> Post(const std::string& path, const std::string& body);
  // Streams a text response to `sink` as it arrives (logs with follow=1).
  common::Status Stream(const std::string& path, const std::function<void(const char*, size_t)>& sink);

 private:
  common::Result<nlohmann::json> Decode(int status, const std::string& body);
  Config config_;
  std::unique_ptr<httplib::Client> http_;
};

}  // namespace cli
