// Route registration with the cross-cutting parts every request gets: a request id (echoed or
// generated, returned as X-Request-Id) and one access-log line (both from common/http/
// access_log.h, shared with the agent), bearer authentication where the route needs it, a
// per-token rate limit (429 + Retry-After), exceptions turned into 500, metrics by route pattern,
// and an audit row for every mutating call (who, tenant, route, target, outcome), written
// whatever the outcome, refusals included: inside the call's own transaction when it commits one
// (service/audit_scope.h), in one of its own otherwise.
#pragma once

#include <algorithm>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "common/status.h"
#include "controlplane/http/metrics.h"
#include "controlplane/http/rate_limiter.h"
#include "controlplane/service/audit_scope.h"
#include "controlplane/service/principal_cache.h"
#include "controlplane/service/store.h"

namespace controlplane::http {

struct RequestContext {
  std::string request_id;
  bool authenticated = false;
  service::Principal principal;  // set when authenticated
  // For the audit row: what the call acted on ("job 12") and that target's tenant, when the
  // handler knows them better than the path does. Defaults: the path, the caller's tenant.
  std::string audit_target;
  int64_t audit_target_tenant = 0;
  // The code of the error the response carries ("not_found"), as RespondError wrote it.
  std::string error_code;
  // Set by a handler whose call changed nothing although its route may (a dry run): such a
  // call is not audited, as reads are not.
  bool not_audited = false;
};

struct RouterOptions {
  double rate_limit_per_s = 0;  // per token; 0: no limit
  double rate_limit_burst = 0;
  bool audit = true;
  // Audit rows of unauthenticated refusals per client address: this many at once, then one a
  // minute; the rest are counted (embody_audit_suppressed_total).
  int anonymous_audit_burst = 20;
  // Where authenticated tokens are kept (service/principal_cache.h); null: none.
  service::PrincipalCache* principal_cache = nullptr;
};

using RouteHandler =
    std::function<void(const httplib::Request&, httplib::Response&, RequestContext&)>;

class Router {
 public:
  Router(httplib::Server& server, service::Database& db, ServerMetrics& metrics,
         RouterOptions options, std::function<int64_t()> now_ms)
      : server_(server), db_(db), metrics_(metrics), options_(options),
        limiter_(options.rate_limit_per_s, options.rate_limit_burst),
        anonymous_audit_(kAnonymousAuditPerS, std::max(1, options.anonymous_audit_burst)),
        now_ms_(std::move(now_ms)) {}

  // kNone: no token looked at. kBearer: a valid token is required (401 otherwise). kOptional: a
  // valid token is used when present; none or a bad one proceeds unauthenticated.
  enum class Auth { kNone, kBearer, kOptional };
  // `pattern` is the route as docs/api/openapi.yaml writes it ("/v1/jobs/{id}/cancel") and its
  // name in logs, metrics and the audit log; the regex httplib matches is derived from it
  // (common/http/route_pattern.h). Path parameters are req.matches[1], [2], ... in order.
  void Handle(const std::string& method, const std::string& pattern, Auth auth,
              RouteHandler handler);
  // For the few routes no pattern describes (the dashboard's catch-all, the JSON 404): httplib
  // matches `regex`, `name` stands for it in logs and metrics.
  void HandleRegex(const std::string& method, const std::string& regex, const std::string& name,
                   Auth auth, RouteHandler handler);

  // What Handle registered, in order: the API's route table as served (docs/api/openapi.yaml is
  // checked against it). The catch-all 404 routes appear under kUnmatchedRoute.
  struct RouteInfo {
    std::string method;
    std::string pattern;
    Auth auth;
  };
  const std::vector<RouteInfo>& Routes() const { return routes_; }

 private:
  // The audit row of a call as it stands: `status` and `outcome` are the answer's, or what the
  // call is expected to answer when drafted before it is built.
  service::AuditRecord AuditRow(const std::string& method, const std::string& pattern,
                                const httplib::Request& req, const RequestContext& ctx,
                                const service::AuditScope* scope, int status,
                                const std::string& outcome) const;
  // Makes the stored row say `final`: amends the row the call's transaction wrote when it
  // differs, or appends one in a transaction of its own when none was written.
  void Audit(const service::AuditRecord& final, const std::optional<service::AuditRecord>& written);

  httplib::Server& server_;
  service::Database& db_;
  ServerMetrics& metrics_;
  const RouterOptions options_;
  RateLimiter limiter_;
  static constexpr double kAnonymousAuditPerS = 1.0 / 60;
  RateLimiter anonymous_audit_;
  std::function<int64_t()> now_ms_;
  std::vector<RouteInfo> routes_;
};

// The pattern under which requests that match no route are answered (404) and counted.
inline constexpr const char* kUnmatchedRoute = "unmatched";

void RespondJson(httplib::Response& res, int status, const nlohmann::json& body);
// Also records the error's code in the RequestContext of the request this thread serves, for
// its audit row.
void RespondError(httplib::Response& res, const common::Status& status);
// `r`'s value as JSON with `ok_status`, or its error as RespondError writes it.
void RespondResult(httplib::Response& res, const common::Result<nlohmann::json>& r,
                   int ok_status = 200);

// Query parameter helpers (common::ParseInt64: strict decimal): a malformed or out-of-range
// number is invalid_argument naming the parameter.
common::Result<int64_t> QueryInt(const httplib::Request& req, const std::string& name,
                                 int64_t fallback,
                                 int64_t min = std::numeric_limits<int64_t>::min(),
                                 int64_t max = std::numeric_limits<int64_t>::max());
// The `index`th path parameter as a positive id; one that is not (too large for an id) is
// not_found, as no such `what` can exist.
// A boolean query parameter: absent is `fallback`; "true" or "false", else invalid_argument
// naming the parameter.
common::Result<bool> QueryBool(const httplib::Request& req, const std::string& name,
                               bool fallback = false);
common::Result<int64_t> PathId(const httplib::Request& req, int index, const std::string& what);
common::Result<nlohmann::json> ParseJsonBody(const httplib::Request& req);

// Routes whose calls are audited: every mutating one but an agent's heartbeat (every second per
// node, it would drown the log, and is itself the record of the node's liveness), and the GETs
// that download what a tenant keeps (checkpoints, logs, dataset uploads).
bool IsAuditedRoute(const std::string& method, const std::string& pattern);

}  // namespace controlplane::http
