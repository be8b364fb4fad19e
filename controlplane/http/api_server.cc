#include "controlplane/http/api_server.h"

#include <atomic>
#include <chrono>
#include <thread>

#include <httplib.h>

#include "common/http/status_http.h"
#include "common/parse_int.h"
#include "controlplane/http/gated_server.h"
#include "controlplane/http/router.h"
#include "controlplane/http/routes.h"

namespace controlplane::http {

namespace {
// httplib refuses bodies above this before any handler runs; it is set well above the JobSpec
// limit so that an oversize JobSpec gets our 400 with a JSON error rather than httplib's 413.
constexpr size_t kTransportBodyLimit = 8 * 1024 * 1024;
// The most of a body read from a request that names no bearer token.
constexpr int64_t kUnauthenticatedBodyLimit = 64 * 1024;
constexpr size_t kHttpThreads = 32;
// Connections the kernel completes before the accept loop takes them: every agent reconnects at
// once after a server restart.
constexpr int kListenBacklog = 1024;

GateOptions Gate() {
  GateOptions o;
  o.workers = kHttpThreads;
  return o;
}
}  // namespace

struct ApiServer::Impl {
  explicit Impl(ApiDeps d)
      : deps(std::move(d)),
        router(server, *deps.db, *deps.metrics, deps.router, deps.now_ms) {}
  ApiDeps deps;
  // Workers serve whole requests only: idle and slow clients wait at its gate (gated_server.h).
  GatedServer server{Gate()};
  Router router;
  std::atomic<bool> stopping{false};
};

ApiServer::ApiServer(ApiDeps deps) : impl_(std::make_unique<Impl>(std::move(deps))) {
  Impl& m = *impl_;
  m.server.set_payload_max_length(kTransportBodyLimit);
  m.server.set_read_timeout(30, 0);
  // Requests arrive as separate header and body writes; without TCP_NODELAY on both ends Nagle's
  // algorithm and the delayed ACK add about 40 ms to a heartbeat.
  m.server.set_tcp_nodelay(true);
  m.server.set_write_timeout(30, 0);
  // Debian's httplib answers "Accept-Encoding: br" (every browser sends it) with Brotli at its
  // slowest quality: 0.2 s for the dashboard's 94 KB bundle, about 1 s for 500 KB of metrics
  // JSON. Offered gzip instead, it compresses the same in 10 ms. httplib reads the header from
  // this same Request when it writes the response.
  //
  // This handler runs after the headers and before httplib reads a body, so it is also where a
  // body is refused before it is read: a chunked one (httplib 0.11.4 reads chunked bodies without
  // its length limit, so one could grow without bound; every client of ours sends a length) and
  // one sent with no bearer token (every route that takes a body needs one). The answer asks the
  // client to close (Connection: close); a client that keeps sending only feeds httplib's bounded
  // request-line reader, and the unread body of a refused request was not served as a request
  // (api_pg_test).
  m.server.set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
    auto refuse = [&](int status, common::Code code, const std::string& why) {
      // httplib decides to close from the request's own Connection header.
      auto& headers = const_cast<httplib::Request&>(req).headers;
      headers.erase("Connection");
      headers.emplace("Connection", "close");
      RespondJson(res, status, common::http::ErrorBody(common::Status(code, why)));
      return httplib::Server::HandlerResponse::Handled;
    };
    const std::string te = req.get_header_value("Transfer-Encoding");
    if (!te.empty() && te != "identity") {
      return refuse(411, common::Code::kInvalidArgument,
                    "request bodies must be sent with Content-Length, not Transfer-Encoding: " +
                        te.substr(0, 64));
    }
    // A small body without a token goes on to the router, which audits the refusal; a larger
    // one is refused here, unread, like the transport's own 413.
    if (req.has_header("Content-Length") &&
        !common::ParseInt64(req.get_header_value("Content-Length"), 0, kUnauthenticatedBodyLimit)
             .ok() &&
        req.get_header_value("Authorization").rfind("Bearer ", 0) != 0) {
      return refuse(401, common::Code::kUnauthenticated,
                    "missing bearer token (a body over " +
                        std::to_string(kUnauthenticatedBodyLimit >> 10) +
                        " KiB is not read without one)");
    }
    auto& headers = const_cast<httplib::Request&>(req).headers;
    auto it = headers.find("Accept-Encoding");
    if (it != headers.end() && it->second.find("br") != std::string::npos) {
      it->second = it->second.find("gzip") != std::string::npos ? "gzip" : "identity";
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // httplib answers some requests itself, before any route runs: a request it cannot read
  // (400), a URI over its limit (414), a body over the transport limit (413). Those get a JSON
  // error as well; an error a handler wrote is left as it is.
  m.server.set_error_handler(
      httplib::Server::HandlerWithResponse([](const httplib::Request&, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        const std::string what = res.status == 413   ? "request body too large"
                                 : res.status == 414 ? "request URI too long"
                                                     : "HTTP " + std::to_string(res.status);
        const common::Code code = res.status == 404   ? common::Code::kNotFound
                                  : res.status >= 500 ? common::Code::kInternal
                                                      : common::Code::kInvalidArgument;
        RespondJson(res, res.status, common::http::ErrorBody(common::Status(code, what)));
        return httplib::Server::HandlerResponse::Handled;
      }));
  using A = Router::Auth;
  Router& r = m.router;

  r.Handle("GET", "/healthz", A::kNone,
           [](const httplib::Request&, httplib::Response& res, RequestContext&) {
             RespondJson(res, 200, {{"status", "ok"}});
           });
  r.Handle("GET", "/readyz", A::kNone,
           [&m](const httplib::Request&, httplib::Response& res, RequestContext&) {
             common::Status st = m.deps.ready ? m.deps.ready() : common::Status::Ok();
             if (!st.ok()) return RespondError(res, common::Unavailable(st.message()));
             RespondJson(res, 200, {{"status", "ready"}});
           });
  // Open to any scraper, but the series that name tenants only to a cluster-admin's token.
  r.Handle("GET", "/metrics", A::kOptional,
           [&m](const httplib::Request&, httplib::Response& res, RequestContext& ctx) {
             res.status = 200;
             res.set_content(m.deps.metrics->Serialize(ctx.authenticated &&
                                                       ctx.principal.IsClusterAdmin()),
                             "text/plain; version=0.0.4");
           });
  AddJobRoutes(r, m.deps);
  AddCheckpointRoutes(r, m.deps);
  AddNodeRoutes(r, m.deps);
  AddTenantRoutes(r, m.deps);
  AddDatasetRoutes(r, m.deps);
  AddLogRoutes(r, m.deps, m.stopping);
  AddPlanRoutes(r, m.deps);
  AddWebRoutes(r, m.deps);
  // Anything else: a JSON 404, counted under one route name so raw paths never become labels.
  // [\s\S], not '.': a decoded path may hold a newline (%0a), which '.' does not match.
  for (const char* method : {"GET", "POST", "PUT", "DELETE", "PATCH"}) {
    r.HandleRegex(method, R"([\s\S]*)", kUnmatchedRoute, A::kNone,
             [](const httplib::Request& req, httplib::Response& res, RequestContext&) {
               RespondError(res, common::NotFound("no route for " + req.path));
             });
  }
}

ApiServer::~ApiServer() { Stop(); }

common::Result<int> ApiServer::Bind(const std::string& host, int port) {
  int bound = port == 0 ? impl_->server.bind_to_any_port(host)
                        : (impl_->server.bind_to_port(host, port) ? port : -1);
  if (bound <= 0 || !impl_->server.SetListenBacklog(kListenBacklog)) {
    return common::Unavailable("cannot listen on " + host + ":" + std::to_string(port));
  }
  return bound;
}

void ApiServer::SetAdvertiseAddress(const std::string& host_port) {
  impl_->deps.advertise_address = host_port;
}

const std::vector<Router::RouteInfo>& ApiServer::Routes() const {
  return impl_->router.Routes();
}

void ApiServer::Serve() { impl_->server.listen_after_bind(); }

bool ApiServer::WaitUntilServing(double seconds) {
  for (int i = 0; i < seconds * 1000 && !impl_->server.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return impl_->server.is_running();
}

void ApiServer::Stop() {
  impl_->stopping = true;
  impl_->server.stop();
  impl_->server.StopGate();
}

}  // namespace controlplane::http
