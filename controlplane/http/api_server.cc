#include "controlplane/http/api_server.h"

#include <atomic>
#include <chrono>
#include <thread>

#include <httplib.h>

#include "common/http/status_http.h"
#include "common/parse_int.h"
#include "common/http/gated_server.h"
#include "common/http/server_tls.h"
#include "common/http/request_head.h"
#include "controlplane/http/router.h"
#include "controlplane/http/routes.h"
#include "controlplane/service/roles.h"

namespace controlplane::http {

namespace {
// Bodies over this are refused unread (413); it is set well above the JobSpec limit so that an
// oversize JobSpec gets our 400 naming the field, and above a checkpoint or dataset part (4 MiB).
constexpr size_t kTransportBodyLimit = 8 * 1024 * 1024;
// The most of a body read from a request that names no bearer token: every route that takes a
// body needs one, so this is only what a 401 needs.
constexpr size_t kUnauthenticatedBodyLimit = 64 * 1024;
constexpr size_t kHttpThreads = 32;
// Log follows served at once, each on a thread of its own pool (beyond: 503).
constexpr size_t kStreamThreads = 256;
// Connections the kernel completes before the accept loop takes them: every agent reconnects at
// once after a server restart.
constexpr int kListenBacklog = 1024;

// GET /v1/jobs/{id}/logs?follow=1: a response that lasts as long as the job.
bool IsLogFollow(const common::http::RequestHead& head) {
  if (head.method != "GET") return false;
  std::string_view path = common::http::TargetPath(head.target);
  constexpr std::string_view kJobs = "/v1/jobs/", kLogs = "/logs";
  return path.size() > kJobs.size() + kLogs.size() && path.substr(0, kJobs.size()) == kJobs &&
         path.substr(path.size() - kLogs.size()) == kLogs &&
         common::http::QueryValue(head.target, "follow") == "1";
}

common::http::GateOptions Gate(std::shared_ptr<const common::http::ServerTls> tls) {
  common::http::GateOptions o;
  o.tls = std::move(tls);
  o.workers = kHttpThreads;
  o.limits = {.max_body = kTransportBodyLimit, .anonymous_body = kUnauthenticatedBodyLimit};
  o.is_stream = IsLogFollow;
  o.stream_workers = kStreamThreads;
  return o;
}
}  // namespace

struct ApiServer::Impl {
  explicit Impl(ApiDeps d)
      : deps(std::move(d)),
        server(Gate(deps.tls)),
        router(server, *deps.db, *deps.metrics, deps.router, deps.now_ms) {}
  ApiDeps deps;
  // Workers serve whole requests only: idle and slow clients wait at its gate (gated_server.h).
  common::http::GatedServer server;
  Router router;
  std::atomic<bool> stopping{false};
};

ApiServer::ApiServer(ApiDeps deps) : impl_(std::make_unique<Impl>(std::move(deps))) {
  Impl& m = *impl_;
  m.server.set_read_timeout(30, 0);
  // Requests arrive as separate header and body writes; without TCP_NODELAY on both ends Nagle's
  // algorithm and the delayed ACK add about 40 ms to a heartbeat.
  m.server.set_tcp_nodelay(true);
  m.server.set_write_timeout(30, 0);
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
  // Open to any scraper, but the series that name tenants only to a monitoring or cluster-admin
  // token.
  r.Handle("GET", "/metrics", A::kOptional,
           [&m](const httplib::Request&, httplib::Response& res, RequestContext& ctx) {
             res.status = 200;
             res.set_content(m.deps.metrics->Serialize(ctx.authenticated &&
                                                       service::MayMonitor(ctx.principal)),
                             "text/plain; version=0.0.4");
           });
  AddJobRoutes(r, m.deps);
  AddCheckpointRoutes(r, m.deps);
  AddNodeRoutes(r, m.deps);
  AddTenantRoutes(r, m.deps);
  AddDatasetRoutes(r, m.deps);
  AddPipelineRoutes(r, m.deps);
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
