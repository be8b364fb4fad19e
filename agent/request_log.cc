#include "agent/request_log.h"

#include <chrono>
#include <cstdio>

#include "common/log.h"

namespace agent {
namespace {

// httplib serves a request, sends the response and calls the logger on one thread, so the
// request's start time and route can live in thread-locals between the hooks.
thread_local std::chrono::steady_clock::time_point t_started;
thread_local std::string t_route;

common::LogLevel LevelFor(const std::string& route, int status) {
  if (status >= 500) return common::LogLevel::kError;
  if (status >= 400) return common::LogLevel::kWarn;
  if (route == "/metrics" || route == "/healthz") return common::LogLevel::kDebug;
  return common::LogLevel::kInfo;
}

}  // namespace

std::string RequestIdFor(const std::string& incoming) { return common::RequestIdFor(incoming); }

void EnableRequestLog(httplib::Server& server) {
  server.set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
    t_started = std::chrono::steady_clock::now();
    t_route = "unmatched";
    res.set_header(kRequestIdHeader, RequestIdFor(req.get_header_value(kRequestIdHeader)));
    return httplib::Server::HandlerResponse::Unhandled;
  });
  server.set_logger([](const httplib::Request& req, const httplib::Response& res) {
    // Empty when the pre-routing hook did not run (httplib answered a malformed request itself).
    const bool routed = !t_route.empty();
    double ms = routed ? std::chrono::duration<double, std::milli>(
                             std::chrono::steady_clock::now() - t_started)
                             .count()
                       : 0.0;
    const std::string route = routed ? t_route : "unmatched";
    char duration[32];
    std::snprintf(duration, sizeof(duration), "%.3f", ms);
    // A response httplib produced before routing (e.g. a bad request line) has no id yet.
    std::string id = res.get_header_value(kRequestIdHeader);
    if (id.empty()) id = RequestIdFor(req.get_header_value(kRequestIdHeader));
    common::Log(LevelFor(route, res.status), "http request",
                {{"request_id", id},
                 {"method", req.method},
                 {"route", route},
                 {"status", std::to_string(res.status)},
                 {"duration_ms", duration},
                 {"remote", req.remote_addr}});
    t_route.clear();
  });
}

httplib::Server::Handler Routed(std::string route, httplib::Server::Handler handler) {
  return [route = std::move(route), handler = std::move(handler)](const httplib::Request& req,
                                                                  httplib::Response& res) {
    t_route = route;
    handler(req, res);
  };
}

}  // namespace agent
