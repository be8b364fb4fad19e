#include "agent/local_api/local_api.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <memory>

#include <nlohmann/json.hpp>

#include "agent/rsh/rsh_bridge.h"
#include "agent/rsh/rsh_protocol.h"
#include "api/job_event_check.h"
#include "common/crypto.h"
#include "common/http/access_log.h"
#include "common/http/gated_server.h"
#include "common/http/request_head.h"
#include "common/http/route_pattern.h"
#include "common/http/status_http.h"
#include "common/log.h"
#include "common/parse_int.h"
#include "common/time_util.h"

namespace agent {
namespace {

using nlohmann::json;

// The same wire form as embody-server's errors, so one decoder reads both.
LocalReply Error(const common::Status& status) {
  return {common::http::HttpStatusFor(status.code()), common::http::ErrorBodyText(status)};
}

// The credential of an `Authorization: Bearer <credential>` value; empty when it is not one.
std::string BearerCredential(const std::string& authorization) {
  const std::string kBearer = "Bearer ";
  if (authorization.rfind(kBearer, 0) != 0) return "";
  return authorization.substr(kBearer.size());
}

}  // namespace

LocalApi::LocalApi(JobLookup lookup, EventQueue* events, AgentMetrics* metrics,
                   std::string metrics_token_sha256)
    : lookup_(std::move(lookup)),
      events_(events),
      metrics_(metrics),
      metrics_token_sha256_(std::move(metrics_token_sha256)) {}

LocalApi::~LocalApi() { Stop(); }

void LocalApi::ServeDaemon(std::shared_ptr<RemoteDaemon> daemon, httplib::Response& res) {
  res.set_chunked_content_provider(
      "application/octet-stream",
      [daemon](size_t, httplib::DataSink& sink) {
        // A keepalive each second while the daemon is silent: a write to a caller that has gone
        // fails, which ends the stream (and, below, the daemon) within a few seconds.
        RemoteDaemon::Update u = daemon->Next(std::chrono::seconds(1));
        std::string out;
        for (size_t at = 0; at < u.output.size(); at += kMaxFramePayload) {
          out += EncodeFrame(FrameType::kOutput, u.output.substr(at, kMaxFramePayload));
        }
        if (u.exit_code) out += EncodeFrame(FrameType::kExit, std::to_string(*u.exit_code));
        if (out.empty()) out = EncodeFrame(FrameType::kKeepalive, "");
        if (!sink.write(out.data(), out.size())) return false;
        if (u.exit_code) sink.done();
        return true;
      },
      [daemon](bool success) {
        if (!success) daemon->Stop("the stream to the head node ended");
      });
}

LocalReply LocalApi::PostEvents(int64_t job_id, const std::string& authorization,
                                const std::string& body) {
  auto job = lookup_(job_id);
  if (!job)
    return Error(common::NotFound("job " + std::to_string(job_id) + " is not running here"));
  std::string token = BearerCredential(authorization);
  if (token.empty() || !common::ConstantTimeEquals(token, job->token)) {
    return Error(common::Status(common::Code::kUnauthenticated, "missing or wrong job token"));
  }
  if (body.size() > kMaxBodyBytes) return Error(common::InvalidArgument("body too large"));
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return Error(common::InvalidArgument("body must be a JSON object"));
  }
  json list = parsed.contains("events") ? parsed["events"] : json::array({parsed});
  if (!list.is_array()) return Error(common::InvalidArgument("events must be an array"));
  if (list.size() > kMaxEventsPerPost) return Error(common::InvalidArgument("too many events"));
  // Every event is checked before any is queued: a post is taken whole or refused whole, so the
  // job knows exactly what the server will get. Each bad event is counted with its reason.
  std::optional<common::Status> refusal;
  for (size_t i = 0; i < list.size(); ++i) {
    const json& e = list[i];
    std::string_view type;
    if (e.is_object()) {
      auto t = e.find("type");
      if (t != e.end() && t->is_string()) type = t->get_ref<const std::string&>();
    }
    auto bad = api::CheckJobEvent(type, e);
    if (!bad) continue;
    metrics_->CountEventsDropped(bad->reason);
    if (!refusal) {
      const std::string at = "events[" + std::to_string(i) + "]";
      refusal = common::InvalidArgument(at + ": " + bad->message + " (" + bad->reason + ")",
                                        bad->field.empty() ? at : at + "." + bad->field);
    }
  }
  if (refusal) return Error(*refusal);
  const int64_t now = common::NowMillis();
  std::vector<api::JobEventReport> reports;
  reports.reserve(list.size());
  for (const auto& e : list) reports.push_back({job_id, now, e["type"].get<std::string>(), e});
  if (!events_->PushAll(std::move(reports))) {
    metrics_->CountEventsDropped("queue_full", list.size());
    LocalReply r = Error(common::Status(
        common::Code::kResourceExhausted,
        "the agent's event queue is full (the server is behind or unreachable); retry later"));
    r.retry_after_s = 5;
    return r;
  }
  for (const auto& e : list) {
    if (e["type"] == "step") metrics_->ObserveStep(job_id, job->tenant, e);
    if (observer_) observer_(job_id, e);
  }
  metrics_->SetEventsDropped(events_->dropped());
  return {202, json{{"accepted", list.size()}}.dump()};
}

bool LocalApi::MayScrapeJobs(const std::string& authorization) const {
  if (metrics_token_sha256_.empty()) return false;
  std::string secret = BearerCredential(authorization);
  // Digests of equal length, compared in constant time: the time taken says nothing of how much
  // of a guess was right.
  return !secret.empty() &&
         common::ConstantTimeEquals(common::Sha256Hex(secret), metrics_token_sha256_);
}

common::Result<int> LocalApi::Start(const std::string& host, int port) {
  // The same edge as embody-server's (common/http/gated_server.h, edge_policy.h): requests are
  // read whole by the gate, within deadlines, before a worker sees them; bodies are bounded
  // before they are read; rsh streams have threads of their own, as many as the bridge allows
  // daemons (and a few more, so that the bridge itself says why it refuses one).
  common::http::GateOptions gate;
  gate.workers = 8;
  gate.limits = {.max_body = kMaxBodyBytes, .anonymous_body = kAnonymousBodyBytes};
  gate.max_connections = 4096;
  gate.tls = tls_;
  if (bridge_ != nullptr) {
    gate.is_stream = [](const common::http::RequestHead& head) {
      std::string_view path = common::http::TargetPath(head.target);
      return head.method == "POST" && path.size() > 4 && path.substr(path.size() - 4) == "/rsh";
    };
    gate.stream_workers = static_cast<size_t>(max_streams_) + 4;
  }
  server_ = std::make_unique<common::http::GatedServer>(std::move(gate));
  // httplib writes a request's headers and body separately: without TCP_NODELAY on both ends,
  // Nagle's algorithm and the delayed ACK hold every post for about 40 ms.
  server_->set_tcp_nodelay(true);
  server_->set_read_timeout(30, 0);
  server_->set_write_timeout(30, 0);
  using common::http::ServedCall;
  using common::http::WithAccessLog;
  const std::string events_route = "/v1/local/jobs/{id}/events";
  server_->Post(common::http::PatternRegex(events_route),
                WithAccessLog("POST", events_route,
                              [this](const httplib::Request& req, httplib::Response& res,
                                     ServedCall&) {
                                // An id too large for any job is a job not running here.
                                auto id = common::ParseInt64(req.matches[1].str(), 1);
                                LocalReply r = PostEvents(id.ok() ? *id : -1,
                                                          req.get_header_value("Authorization"),
                                                          req.body);
                                res.status = r.http_status;
                                if (r.retry_after_s > 0) {
                                  res.set_header("Retry-After", std::to_string(r.retry_after_s));
                                }
                                res.set_content(r.body, "application/json");
                              }));
  if (bridge_ != nullptr) {
    const std::string rsh_route = "/v1/local/jobs/{id}/rsh";
    server_->Post(
        common::http::PatternRegex(rsh_route),
        WithAccessLog("POST", rsh_route,
                      [this](const httplib::Request& req, httplib::Response& res, ServedCall&) {
                        auto id = common::ParseInt64(req.matches[1].str(), 1);
                        auto daemon = bridge_->Start(id.ok() ? *id : -1,
                                                     req.get_header_value("Authorization"),
                                                     req.body);
                        if (!daemon.ok()) {
                          LocalReply r = Error(daemon.status());
                          res.status = r.http_status;
                          res.set_content(r.body, "application/json");
                          return;
                        }
                        ServeDaemon(*daemon, res);
                      }));
  }
  if (bridge_ != nullptr) {
    const std::string image_route = "/v1/local/jobs/{id}/image";
    server_->Get(common::http::PatternRegex(image_route),
                 WithAccessLog("GET", image_route,
                               [this](const httplib::Request& req, httplib::Response& res,
                                      ServedCall&) {
                                 auto id = common::ParseInt64(req.matches[1].str(), 1);
                                 auto ready = bridge_->ImageReady(
                                     id.ok() ? *id : -1, req.get_header_value("Authorization"));
                                 LocalReply r = ready.ok()
                                                    ? LocalReply{200,
                                                                 nlohmann::json{{"ready", *ready}}
                                                                     .dump()}
                                                    : Error(ready.status());
                                 res.status = r.http_status;
                                 res.set_content(r.body, "application/json");
                               }));
  }
  server_->Get("/metrics", WithAccessLog("GET", "/metrics",
                                         [this](const httplib::Request&, httplib::Response& res,
                                                ServedCall&) {
                                           res.set_content(metrics_->Serialize(),
                                                           "text/plain; version=0.0.4");
                                         }));
  const std::string job_metrics_route = "/metrics/jobs/{id}";
  server_->Get(
      common::http::PatternRegex(job_metrics_route),
      WithAccessLog("GET", job_metrics_route,
                    [this](const httplib::Request& req, httplib::Response& res, ServedCall&) {
                      if (!MayScrapeJobs(req.get_header_value("Authorization"))) {
                        LocalReply r =
                            metrics_token_sha256_.empty()
                                ? Error(common::Status(common::Code::kNotFound,
                                                       "this agent serves no job series: it was "
                                                       "started without --metrics-token-file"))
                                : Error(common::Status(common::Code::kUnauthenticated,
                                                       "job series need the metrics secret"));
                        res.status = r.http_status;
                        res.set_content(r.body, "application/json");
                        return;
                      }
                      // An id too large for any job is a job with no series here.
                      auto id = common::ParseInt64(req.matches[1].str(), 1);
                      res.set_content(id.ok() ? metrics_->SerializeJob(*id) : std::string(),
                                      "text/plain; version=0.0.4");
                    }));
  server_->Get("/healthz",
               WithAccessLog("GET", "/healthz",
                             [](const httplib::Request&, httplib::Response& res, ServedCall&) {
                               res.set_content("ok\n", "text/plain");
                             }));
  // Anything else: a JSON 404, logged under one route name so raw paths never become fields.
  // [\s\S], not '.': a decoded path may hold a newline (%0a), which '.' does not match.
  auto unmatched = [](const std::string& method) {
    return WithAccessLog(method, "unmatched",
                         [](const httplib::Request& req, httplib::Response& res, ServedCall&) {
                           LocalReply r = Error(common::NotFound("no route for " + req.path));
                           res.status = r.http_status;
                           res.set_content(r.body, "application/json");
                         });
  };
  server_->Get(R"([\s\S]*)", unmatched("GET"));
  server_->Post(R"([\s\S]*)", unmatched("POST"));
  server_->Put(R"([\s\S]*)", unmatched("PUT"));
  server_->Delete(R"([\s\S]*)", unmatched("DELETE"));
  server_->Patch(R"([\s\S]*)", unmatched("PATCH"));
  int bound =
      port == 0 ? server_->bind_to_any_port(host) : (server_->bind_to_port(host, port) ? port : -1);
  if (bound <= 0 || !server_->SetListenBacklog(1024)) {
    return common::Unavailable("cannot listen on " + host + ":" + std::to_string(port));
  }
  auto ended = std::make_shared<std::atomic<bool>>(false);
  thread_ = std::thread([this, ended] {
    server_->listen_after_bind();
    *ended = true;
  });
  // httplib's stop() does nothing to a server not yet in its accept loop, which then never ends:
  // a Stop() right after Start() would hang. Return only once it is running (or gave up).
  while (!server_->is_running() && !*ended) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return bound;
}

void LocalApi::Stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
  if (server_) server_->StopGate();
}

}  // namespace agent
