// The middleware every Embody HTTP server wraps its handlers in (embody-server's Router, the
// agent's LocalApi): one request id per call and one access-log line per call.
//
// The request id is the caller's X-Request-Id when it is safe to log (common/request_id.h),
// else a fresh one; it is set on the response before the handler runs and handed to it. When
// the handler returns, one JSON line (common/log.h) is written with msg "http request":
// request_id, method, route (the registered pattern, never the raw path, so ids in paths do not
// make the field unbounded), status, ms, remote, plus whatever fields the handler added.
// A handler that throws is answered 500 with the JSON error body (code "internal") and logged;
// a handler that set no status answers 200.
//
// Levels: 5xx error, 4xx warn, successful scrapes and probes (/metrics, /healthz, /readyz) debug
// so a 15 s scrape interval does not flood the log, everything else info.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <httplib.h>

#include "common/log.h"

namespace common::http {

// One call as the middleware sees it; handed to the wrapped handler.
struct ServedCall {
  std::string request_id;
  std::string method;
  std::string route;
  double start_s = 0;  // common::MonotonicSeconds() on arrival
  // More fields for the access line ("tenant", "token_id"), in order; set by the handler.
  std::vector<std::pair<std::string, std::string>> log_fields;
  double ElapsedSeconds() const;
};

using TracedHandler =
    std::function<void(const httplib::Request&, httplib::Response&, ServedCall&)>;

// `handler` wrapped in the request id, the exception guard and the access line.
httplib::Server::Handler WithAccessLog(std::string method, std::string route,
                                       TracedHandler handler);

LogLevel AccessLogLevel(const std::string& route, int status);

}  // namespace common::http
