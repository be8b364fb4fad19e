// Request ids and access logs for an httplib::Server.
//
// Every request gets an id: the caller's X-Request-Id when it is a sane token (1-128 characters
// of [A-Za-z0-9._:-]; common/request_id.h, the rule embody-server follows too), else a fresh
// random one. The id is echoed in the response's X-Request-Id and written, with the method, the
// route pattern (not the raw path, so job ids do not make log fields unbounded), the status and
// the duration, as one JSON log line (common/log.h) when the response has been sent. Handlers registered through Routed() name their pattern; anything else
// is logged with route "unmatched". Successful scrapes and health checks log at debug level so a
// 15 s scrape interval does not flood the log; client errors at warn, server errors at error.
#pragma once

#include <string>

#include <httplib.h>

#include "common/request_id.h"

namespace agent {

inline constexpr const char* kRequestIdHeader = common::kRequestIdHeader;

// The incoming id if acceptable, else a new one (16 hex characters).
std::string RequestIdFor(const std::string& incoming);

// Installs the pre-routing and logging hooks on `server`.
void EnableRequestLog(httplib::Server& server);

// Wraps a handler so the access log names `route` (the pattern it is registered under).
httplib::Server::Handler Routed(std::string route, httplib::Server::Handler handler);

}  // namespace agent
