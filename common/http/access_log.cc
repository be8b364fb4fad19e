#include "common/http/access_log.h"

#include <cstdio>

#include "common/http/status_http.h"
#include "common/request_id.h"
#include "common/time_util.h"

namespace common::http {

double ServedCall::ElapsedSeconds() const { return MonotonicSeconds() - start_s; }

LogLevel AccessLogLevel(const std::string& route, int status) {
  if (status >= 500) return LogLevel::kError;
  if (status >= 400) return LogLevel::kWarn;
  if (route == "/metrics" || route == "/healthz" || route == "/readyz") return LogLevel::kDebug;
  return LogLevel::kInfo;
}

httplib::Server::Handler WithAccessLog(std::string method, std::string route,
                                       TracedHandler handler) {
  return [method = std::move(method), route = std::move(route), handler = std::move(handler)](
             const httplib::Request& req, httplib::Response& res) {
    ServedCall call;
    call.start_s = MonotonicSeconds();
    call.method = method;
    call.route = route;
    call.request_id = RequestIdFor(req.get_header_value(kRequestIdHeader));
    res.set_header(kRequestIdHeader, call.request_id);
    try {
      handler(req, res, call);
    } catch (const std::exception& e) {
      LogError("handler threw", {{"request_id", call.request_id}, {"error", e.what()}});
      res.status = 500;
      res.set_content(ErrorBodyText(Internal("internal error")) + "\n", "application/json");
    }
    if (res.status == -1) res.status = 200;
    char ms[32];
    std::snprintf(ms, sizeof(ms), "%.3f", call.ElapsedSeconds() * 1000);
    std::vector<std::pair<std::string, std::string>> fields = {
        {"request_id", call.request_id}, {"method", method},
        {"route", route},                {"status", std::to_string(res.status)},
        {"ms", ms},                      {"remote", req.remote_addr}};
    fields.insert(fields.end(), call.log_fields.begin(), call.log_fields.end());
    LogFields(AccessLogLevel(route, res.status), "http request", fields);
  };
}

}  // namespace common::http
