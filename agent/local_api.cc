#include "agent/local_api.h"

#include <httplib.h>

#include <nlohmann/json.hpp>

#include "agent/request_log.h"
#include "common/crypto.h"
#include "common/log.h"
#include "common/time_util.h"

namespace agent {
namespace {

using nlohmann::json;

LocalReply Error(int http_status, const char* code, const std::string& message) {
  return {http_status, json{{"error", {{"code", code}, {"message", message}}}}.dump()};
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

LocalReply LocalApi::PostEvents(int64_t job_id, const std::string& authorization,
                                const std::string& body) {
  auto job = lookup_(job_id);
  if (!job)
    return Error(404, "not_found", "job " + std::to_string(job_id) + " is not running here");
  std::string token = BearerCredential(authorization);
  if (token.empty() || !common::ConstantTimeEquals(token, job->token)) {
    return Error(401, "unauthenticated", "missing or wrong job token");
  }
  if (body.size() > kMaxBodyBytes) return Error(400, "invalid_argument", "body too large");
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return Error(400, "invalid_argument", "body must be a JSON object");
  }
  json list = parsed.contains("events") ? parsed["events"] : json::array({parsed});
  if (!list.is_array()) return Error(400, "invalid_argument", "events must be an array");
  if (list.size() > kMaxEventsPerPost) return Error(400, "invalid_argument", "too many events");
  for (const auto& e : list) {
    auto type = e.is_object() ? e.find("type") : e.end();
    if (!e.is_object() || type == e.end() || !type->is_string() ||
        type->get_ref<const std::string&>().empty()) {
      return Error(400, "invalid_argument", "every event must be an object with a string type");
    }
  }
  int64_t now = common::NowMillis();
  for (auto& e : list) {
    std::string type = e["type"].get<std::string>();
    if (type == "step") metrics_->ObserveStep(job_id, job->tenant, e);
    if (observer_) observer_(job_id, e);
    events_->Push({job_id, now, std::move(type), std::move(e)});
  }
  metrics_->SetEventsDropped(events_->dropped());
  return {202, json{{"accepted", list.size()}}.dump()};
}

MetricsAudience LocalApi::MetricsAudienceFor(const std::string& authorization) const {
  if (metrics_token_sha256_.empty()) return MetricsAudience::kAnyone;
  std::string secret = BearerCredential(authorization);
  // Digests of equal length, compared in constant time: the time taken says nothing of how much
  // of a guess was right.
  if (secret.empty() ||
      !common::ConstantTimeEquals(common::Sha256Hex(secret), metrics_token_sha256_)) {
    return MetricsAudience::kAnyone;
  }
  return MetricsAudience::kScraper;
}

common::Result<int> LocalApi::Start(const std::string& host, int port) {
  server_ = std::make_unique<httplib::Server>();
  // httplib writes a request's headers and body separately: without TCP_NODELAY on both ends,
  // Nagle's algorithm and the delayed ACK hold every post for about 40 ms.
  server_->set_tcp_nodelay(true);
  server_->set_payload_max_length(kMaxBodyBytes + 1);
  EnableRequestLog(*server_);
  server_->Post(R"(/v1/local/jobs/(\d+)/events)",
                Routed("/v1/local/jobs/{id}/events", [this](const httplib::Request& req,
                                                            httplib::Response& res) {
                  int64_t id = 0;
                  try {
                    id = std::stoll(req.matches[1].str());
                  } catch (const std::exception&) {
                    id = -1;
                  }
                  LocalReply r = PostEvents(id, req.get_header_value("Authorization"), req.body);
                  res.status = r.http_status;
                  res.set_content(r.body, "application/json");
                }));
  server_->Get(
      "/metrics", Routed("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
        MetricsAudience audience = MetricsAudienceFor(req.get_header_value("Authorization"));
        res.set_content(metrics_->Serialize(audience), "text/plain; version=0.0.4");
      }));
  server_->Get("/healthz", Routed("/healthz", [](const httplib::Request&, httplib::Response& res) {
                 res.set_content("ok\n", "text/plain");
               }));
  int bound =
      port == 0 ? server_->bind_to_any_port(host) : (server_->bind_to_port(host, port) ? port : -1);
  if (bound <= 0) {
    return common::Unavailable("cannot listen on " + host + ":" + std::to_string(port));
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  return bound;
}

void LocalApi::Stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace agent
