#include "controlplane/http/router.h"

#include <atomic>
#include <memory>
#include <optional>

#include "common/http/access_log.h"
#include "common/http/route_pattern.h"
#include "common/http/status_http.h"
#include "common/log.h"
#include "common/parse_int.h"
#include "common/time_util.h"
#include "controlplane/service/auth.h"

namespace controlplane::http {

namespace {

// Text from the request as the audit log can store it: PostgreSQL text holds UTF-8 without NUL
// only, and a path decoded from %XX may hold any byte, so a row written as it came would be
// refused and the call would go unaudited. Bytes outside valid UTF-8 characters and control
// characters are written as %XX; the result is cut at `max` bytes between characters.
std::string AuditText(const std::string& s, size_t max) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
    const unsigned char c = byte(0);
    size_t len = c < 0x80           ? 1
                 : (c >> 5) == 0x6  ? 2
                 : (c >> 4) == 0xe  ? 3
                 : (c >> 3) == 0x1e ? 4
                                    : 0;
    bool valid = len > 0 && i + len <= s.size() && c >= 0x20 && c != 0x7f;
    uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
    for (size_t k = 1; valid && k < len; ++k) {
      valid = (byte(k) & 0xc0) == 0x80;
      cp = (cp << 6) | (byte(k) & 0x3f);
    }
    // No overlong forms, no surrogates, nothing above U+10FFFF.
    if (valid && len > 1) {
      valid = (len == 2 && cp >= 0x80) ||
              (len == 3 && cp >= 0x800 && (cp < 0xd800 || cp > 0xdfff)) ||
              (len == 4 && cp >= 0x10000 && cp <= 0x10ffff);
    }
    std::string piece;
    if (valid) {
      piece = s.substr(i, len);
    } else {
      static const char* kHex = "0123456789ABCDEF";
      piece = {'%', kHex[c >> 4], kHex[c & 15]};
      len = 1;
    }
    if (out.size() + piece.size() > max) break;
    out += piece;
    i += len;
  }
  return out;
}

// The context of the request this thread serves, so that RespondError can note its code there.
thread_local RequestContext* current_request = nullptr;

class CurrentRequest {
 public:
  explicit CurrentRequest(RequestContext* ctx) : outer_(current_request) { current_request = ctx; }
  ~CurrentRequest() { current_request = outer_; }
  CurrentRequest(const CurrentRequest&) = delete;
  CurrentRequest& operator=(const CurrentRequest&) = delete;

 private:
  RequestContext* outer_;
};

bool SameResult(const service::AuditRecord& a, const service::AuditRecord& b) {
  return a.status == b.status && a.outcome == b.outcome && a.target == b.target &&
         a.target_tenant_id == b.target_tenant_id;
}
}  // namespace

void RespondJson(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n",
                  "application/json");
}

void RespondResult(httplib::Response& res, const common::Result<nlohmann::json>& r,
                   int ok_status) {
  if (!r.ok()) return RespondError(res, r.status());
  RespondJson(res, ok_status, *r);
}

void RespondError(httplib::Response& res, const common::Status& given) {
  if (current_request) current_request->error_code = common::CodeName(given.code());
  // What went wrong inside (a database's own words, an internal failure) is for the operator:
  // the server's log has it under the request id, the client gets the code and that id.
  common::Status status = given;
  const bool internal = given.code() == common::Code::kInternal;
  if (internal || given.message().rfind("database: ", 0) == 0) {
    const std::string id = current_request ? current_request->request_id : "";
    common::LogWarn("request failed", {{"request_id", id},
                                       {"code", common::CodeName(given.code())},
                                       {"error", given.message()}});
    status = common::Status(given.code(),
                            std::string(internal ? "internal error"
                                                 : "the request conflicts with stored state") +
                                "; the server's log has the detail under request id " + id);
  }
  // A 503 (the database away or busy) tells clients when to try again; a header set before
  // (the rate limiter's) stays.
  const int retry_after = common::http::RetryAfterSecondsFor(status.code());
  if (retry_after > 0 && !res.has_header("Retry-After")) {
    res.set_header("Retry-After", std::to_string(retry_after));
  }
  RespondJson(res, common::http::HttpStatusFor(status.code()), common::http::ErrorBody(status));
}

void Router::Handle(const std::string& method, const std::string& pattern, Auth auth,
                    RouteHandler handler) {
  HandleRegex(method, common::http::PatternRegex(pattern), pattern, auth, std::move(handler));
}

void Router::HandleRegex(const std::string& method, const std::string& regex,
                         const std::string& pattern, Auth auth, RouteHandler handler) {
  routes_.push_back({method, pattern, auth});
  const bool audited = options_.audit && IsAuditedRoute(method, pattern);
  // What this route answers when its call succeeds, for rows drafted at commit: learnt from the
  // answers sent (201 for a creation), so a mismatch costs one amended row per route, once.
  auto success_status = std::make_shared<std::atomic<int>>(200);
  auto routed = [this, method, pattern, auth, handler, audited, success_status](
                    const httplib::Request& req, httplib::Response& res,
                    common::http::ServedCall& call) {
    RequestContext ctx;
    CurrentRequest current(&ctx);
    // The caller's id when it is safe to log (an agent's heartbeat, a CLI call), else a new one.
    ctx.request_id = call.request_id;
    std::optional<service::AuditScope> scope;
    // Caught here as well as in the access log's guard, so the audit row and the metrics below
    // see the 500 the caller gets.
    try {
      bool allowed = true;
      if (auth != Auth::kNone && (auth == Auth::kBearer || req.has_header("Authorization"))) {
        auto p = service::Authenticate(db_, options_.principal_cache,
                                       req.get_header_value("Authorization"), now_ms_());
        if (p.ok()) {
          ctx.principal = *p;
          ctx.authenticated = true;
        } else if (auth == Auth::kBearer) {
          allowed = false;
          RespondError(res, p.status());
        }
      }
      if (allowed && ctx.authenticated && limiter_.enabled()) {
        const double wait = limiter_.Take(ctx.principal.token_id, call.start_s);
        if (wait > 0) {
          allowed = false;
          res.set_header("Retry-After", std::to_string(static_cast<int64_t>(wait) + 1));
          RespondError(res, common::Status(common::Code::kResourceExhausted,
                                           "rate limit: too many requests for this token"));
        }
      }
      if (allowed) {
        if (audited) {
          scope.emplace([&](const service::AuditScope& s) {
            return AuditRow(method, pattern, req, ctx, &s, success_status->load(), "ok");
          });
        }
        handler(req, res, ctx);
      }
    } catch (const std::exception& e) {
      common::LogError("handler threw", {{"request_id", ctx.request_id}, {"error", e.what()}});
      RespondError(res, common::Internal("internal error"));
    }
    if (res.status == -1) res.status = 200;
    if (audited && !ctx.not_audited) {
      const std::string outcome = res.status < 400         ? "ok"
                                  : ctx.error_code.empty() ? "error"
                                                           : ctx.error_code;
      const service::AuditRecord final =
          AuditRow(method, pattern, req, ctx, scope ? &*scope : nullptr, res.status, outcome);
      std::optional<service::AuditRecord> written;
      if (scope) written = scope->written();
      scope.reset();  // the router's own unit of work below is not the call's
      if (written && res.status < 400 && written->status != res.status) {
        success_status->store(res.status);
      }
      // Refusals of callers without a valid token are written up to a budget per client
      // address, then only counted: anyone can send them, and each would be a row.
      if (!ctx.authenticated && res.status == 401 &&
          anonymous_audit_.Take(static_cast<int64_t>(std::hash<std::string>{}(req.remote_addr)),
                                call.start_s) > 0) {
        metrics_.CountAuditSuppressed();
      } else {
        Audit(final, written);
      }
    }
    metrics_.ObserveRequest(pattern, method, res.status, call.ElapsedSeconds());
    call.log_fields = {{"path", req.path},
                       {"tenant", ctx.principal.tenant},
                       {"token_id", std::to_string(ctx.principal.token_id)}};
  };
  auto wrapped = common::http::WithAccessLog(method, pattern, routed);
  if (method == "GET") {
    server_.Get(regex, wrapped);
  } else if (method == "POST") {
    server_.Post(regex, wrapped);
  } else if (method == "PUT") {
    server_.Put(regex, wrapped);
  } else if (method == "DELETE") {
    server_.Delete(regex, wrapped);
  } else if (method == "PATCH") {
    server_.Patch(regex, wrapped);
  }
}

bool IsAuditedRoute(const std::string& method, const std::string& pattern) {
  // Reads are not audited, but for downloads of what a tenant keeps: checkpoints, logs, datasets.
  if (method == "GET") {
    return pattern == "/v1/jobs/{id}/checkpoints/{checkpoint_id}/data" ||
           pattern == "/v1/jobs/{id}/logs" || pattern == "/v1/datasets/{id}/upload" ||
           pattern == "/v1/datasets/{id}/files/{name}";
  }
  if (method == "HEAD" || method == "OPTIONS") return false;
  return pattern != "/v1/agents/{id}/heartbeat";
}

service::AuditRecord Router::AuditRow(const std::string& method, const std::string& pattern,
                                      const httplib::Request& req, const RequestContext& ctx,
                                      const service::AuditScope* scope, int status,
                                      const std::string& outcome) const {
  service::AuditRecord a;
  a.time_ms = now_ms_();
  a.token_id = ctx.principal.token_id;
  a.actor = ctx.authenticated ? ctx.principal.token_name : "anonymous";
  a.role = ctx.authenticated ? ctx.principal.role : "";
  a.tenant_id = ctx.principal.tenant_id;
  // What the handler says, else what the service noted, else the path and the caller's tenant.
  const std::string noted = scope ? scope->noted_target() : "";
  const int64_t noted_tenant = scope ? scope->noted_target_tenant() : 0;
  a.target_tenant_id = ctx.audit_target_tenant ? ctx.audit_target_tenant
                       : noted_tenant          ? noted_tenant
                                               : ctx.principal.tenant_id;
  a.method = method;
  a.route = pattern;
  // Paths are bounded by httplib; a long one is cut rather than stored whole.
  a.path = AuditText(req.path, 512);
  a.target = !ctx.audit_target.empty() ? AuditText(ctx.audit_target, 512)
             : !noted.empty()          ? AuditText(noted, 512)
                                       : a.path;
  a.status = status;
  a.outcome = outcome;
  a.request_id = ctx.request_id;
  return a;
}

void Router::Audit(const service::AuditRecord& final,
                   const std::optional<service::AuditRecord>& written) {
  if (written && SameResult(*written, final)) return;  // the usual case: nothing more to do
  auto uow = db_.Begin();
  common::Status st = uow.ok() ? common::Status::Ok() : uow.status();
  if (st.ok() && written) {
    // The call committed, then answered otherwise than drafted (failed after its commit, or a
    // status not seen before on this route): the row is corrected to what was answered.
    st = (*uow)->audit().Amend(written->id, final);
  } else if (st.ok()) {
    st = (*uow)->audit().Append(final).status();
  }
  if (st.ok()) st = (*uow)->Commit();
  if (!st.ok()) {
    // The call itself has happened; a lost audit row is reported loudly, not silently dropped.
    common::LogError(
        "audit row not written",
        {{"request_id", final.request_id}, {"route", final.route}, {"error", st.ToString()}});
  }
}

common::Result<int64_t> QueryInt(const httplib::Request& req, const std::string& name,
                                 int64_t fallback, int64_t min, int64_t max) {
  if (!req.has_param(name.c_str())) return fallback;
  return common::ParseInt64(req.get_param_value(name.c_str()), min, max, name);
}

common::Result<bool> QueryBool(const httplib::Request& req, const std::string& name,
                               bool fallback) {
  if (!req.has_param(name.c_str())) return fallback;
  const std::string v = req.get_param_value(name.c_str());
  if (v == "true") return true;
  if (v == "false") return false;
  return common::InvalidArgument(name + " must be true or false", name);
}

common::Result<int64_t> PathId(const httplib::Request& req, int index, const std::string& what) {
  auto id = common::ParseInt64(req.matches[index].str(), 1);
  if (!id.ok()) return common::NotFound(what + " not found");
  return *id;
}

common::Result<nlohmann::json> ParseJsonBody(const httplib::Request& req) {
  auto j = nlohmann::json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return common::InvalidArgument("request body is not valid JSON");
  return j;
}

}  // namespace controlplane::http
