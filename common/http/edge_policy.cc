#include "common/http/edge_policy.h"

#include <cstdint>
#include <string>

#include "common/http/status_http.h"
#include "common/parse_int.h"

namespace common::http {

std::optional<BodyRefusal> RefuseBody(bool chunked, bool encoded, std::optional<uint64_t> length,
                                      bool bearer, const BodyLimits& limits) {
  if (chunked) {
    return BodyRefusal{411, Status(Code::kInvalidArgument,
                                   "request bodies must be sent with Content-Length, not "
                                   "Transfer-Encoding")};
  }
  if (encoded) {
    return BodyRefusal{
        415, Status(Code::kInvalidArgument, "request bodies are not accepted with a Content-Encoding")};
  }
  if (!length) return std::nullopt;
  if (!bearer && *length > limits.anonymous_body) {
    return BodyRefusal{401, Status(Code::kUnauthenticated,
                                   "missing bearer token (a body over " +
                                       std::to_string(limits.anonymous_body >> 10) +
                                       " KiB is not read without one)")};
  }
  if (*length > limits.max_body) {
    return BodyRefusal{413, Status(Code::kInvalidArgument,
                                   "request body too large (the most is " +
                                       std::to_string(limits.max_body >> 10) + " KiB)")};
  }
  return std::nullopt;
}

httplib::Server::HandlerResponse ApplyEdgePolicy(const httplib::Request& req,
                                                 httplib::Response& res, const BodyLimits& limits) {
  // httplib decides how the connection goes on from the request's own headers, and reads the
  // body by them after this handler: both are adjusted on the request itself.
  auto& headers = const_cast<httplib::Request&>(req).headers;
  const std::string te = req.get_header_value("Transfer-Encoding");
  const std::string ce = req.get_header_value("Content-Encoding");
  std::optional<uint64_t> length;
  if (req.has_header("Content-Length")) {
    // One that is not a number counts as too large (the gate answers those 400 first).
    auto n = ParseInt64(req.get_header_value("Content-Length"), 0);
    length = n.ok() ? static_cast<uint64_t>(*n) : UINT64_MAX;
  }
  if (auto refusal =
          RefuseBody(!te.empty() && te != "identity", !ce.empty() && ce != "identity", length,
                     req.get_header_value("Authorization").rfind("Bearer ", 0) == 0, limits)) {
    headers.erase("Connection");
    headers.emplace("Connection", "close");
    res.status = refusal->http_status;
    res.set_content(ErrorBodyText(refusal->status), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }
  if (!length) headers.emplace("Content-Length", "0");
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
