#include "common/http/edge_policy.h"

#include <string>

#include "common/http/status_http.h"
#include "common/parse_int.h"

namespace common::http {

httplib::Server::HandlerResponse ApplyEdgePolicy(const httplib::Request& req,
                                                 httplib::Response& res, const BodyLimits& limits) {
  // httplib decides how the connection goes on from the request's own headers, and reads the
  // body by them after this handler: both are adjusted on the request itself.
  auto& headers = const_cast<httplib::Request&>(req).headers;
  auto refuse = [&](int status, Code code, const std::string& why) {
    headers.erase("Connection");
    headers.emplace("Connection", "close");
    res.status = status;
    res.set_content(ErrorBodyText(Status(code, why)), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  };
  const std::string te = req.get_header_value("Transfer-Encoding");
  if (!te.empty() && te != "identity") {
    return refuse(411, Code::kInvalidArgument,
                  "request bodies must be sent with Content-Length, not Transfer-Encoding: " +
                      te.substr(0, 64));
  }
  const std::string ce = req.get_header_value("Content-Encoding");
  if (!ce.empty() && ce != "identity") {
    return refuse(415, Code::kInvalidArgument,
                  "request bodies are not accepted with Content-Encoding: " + ce.substr(0, 64));
  }
  if (!req.has_header("Content-Length")) {
    headers.emplace("Content-Length", "0");
  } else {
    const std::string length = req.get_header_value("Content-Length");
    const bool bearer = req.get_header_value("Authorization").rfind("Bearer ", 0) == 0;
    if (!bearer && !ParseInt64(length, 0, static_cast<int64_t>(limits.anonymous_body)).ok()) {
      return refuse(401, Code::kUnauthenticated,
                    "missing bearer token (a body over " +
                        std::to_string(limits.anonymous_body >> 10) +
                        " KiB is not read without one)");
    }
    if (!ParseInt64(length, 0, static_cast<int64_t>(limits.max_body)).ok()) {
      return refuse(
          413, Code::kInvalidArgument,
          "request body too large (the most is " + std::to_string(limits.max_body >> 10) + " KiB)");
    }
  }
  auto it = headers.find("Accept-Encoding");
  if (it != headers.end() && it->second.find("br") != std::string::npos) {
    it->second = it->second.find("gzip") != std::string::npos ? "gzip" : "identity";
  }
  return httplib::Server::HandlerResponse::Unhandled;
}

void InstallEdgePolicy(httplib::Server& server, BodyLimits limits) {
  // A little above the largest body a route accepts, so a body the policy lets through is never
  // also refused by httplib's own limit.
  server.set_payload_max_length(limits.max_body + 1);
  server.set_pre_routing_handler([limits](const httplib::Request& req, httplib::Response& res) {
    return ApplyEdgePolicy(req, res, limits);
  });
  server.set_error_handler(
      httplib::Server::HandlerWithResponse([](const httplib::Request&, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        const std::string what = res.status == 413   ? "request body too large"
                                 : res.status == 414 ? "request URI too long"
                                                     : "HTTP " + std::to_string(res.status);
        const Code code = res.status == 404   ? Code::kNotFound
                          : res.status >= 500 ? Code::kInternal
                                              : Code::kInvalidArgument;
        res.set_content(ErrorBodyText(Status(code, what)), "application/json");
        return httplib::Server::HandlerResponse::Handled;
      }));
}

}  // namespace common::http
