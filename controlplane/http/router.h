// Route registration with the cross-cutting parts every request gets: a request id (echoed or
// generated, returned as X-Request-Id), bearer authentication where the route needs it,
// exceptions turned into 500, metrics by route pattern, and one structured log line.
#pragma once

#include <functional>
#include <string>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "common/status.h"
#include "controlplane/http/metrics.h"
#include "controlplane/service/store.h"

namespace controlplane::http {

struct RequestContext {
  std::string request_id;
  service::Principal principal;  // set when the route is authenticated
};

using RouteHandler =
    std::function<void(const httplib::Request&, httplib::Response&, RequestContext&)>;

class Router {
 public:
  Router(httplib::Server& server, service::Database& db, ServerMetrics& metrics)
      : server_(server), db_(db), metrics_(metrics) {}

  enum class Auth { kNone, kBearer };
  // `regex` is what httplib matches; `pattern` is the name in logs and metrics.
  void Handle(const std::string& method, const std::string& regex, const std::string& pattern,
              Auth auth, RouteHandler handler);

 private:
  httplib::Server& server_;
  service::Database& db_;
  ServerMetrics& metrics_;
};

void RespondJson(httplib::Response& res, int status, const nlohmann::json& body);
void RespondError(httplib::Response& res, const common::Status& status);

// Query parameter helpers: a malformed number is invalid_argument naming the parameter.
common::Result<int64_t> QueryInt(const httplib::Request& req, const std::string& name,
                                 int64_t fallback);
common::Result<int64_t> PathId(const httplib::Request& req, int index, const std::string& what);
common::Result<nlohmann::json> ParseJsonBody(const httplib::Request& req);

}  // namespace controlplane::http
