// The job-local HTTP API and the agent's own endpoints, served on --listen (loopback by default).
//
//   POST /v1/local/jobs/{id}/events   Authorization: Bearer <EMBODY_JOB_TOKEN of job id>
//        body {"events":[{...}, ...]} or one event object; each event needs a string "type" and
//        must pass api::CheckJobEvent (size, depth, UTF-8 without NUL, typed known fields).
//        -> 202 {"accepted": N}; 401 wrong/missing token; 404 job not running here; 400 bad body
//        or a bad event (the message names it and why; nothing of the post is queued); 429 with
//        Retry-After when the event queue has no room (nothing queued). Every refused event is
//        counted in embody_agent_events_dropped_total{reason}.
//   GET  /metrics                     Prometheus text format. With `Authorization: Bearer
//        <metrics secret>` (--metrics-token-file) every series; otherwise (no header, a wrong
//        secret, or an agent without one) only those that name no job and no tenant
//        (agent_metrics.h). Never 401: the node's series stay public.
//   GET  /healthz                     "ok"
//
// Every request carries an X-Request-Id back and is access-logged (common/http/access_log.h,
// the middleware embody-server uses too); errors have the server's body, {"error":{...}}.
//
// Events are stamped with the agent's clock and queued for the next heartbeat; `step` events also
// update the job's gauges. Handling is split from serving so the rules are testable without HTTP.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "agent/agent_metrics.h"
#include "agent/event_queue.h"
#include "agent/job_runner.h"
#include "common/status.h"

namespace httplib {
class Server;
}

namespace agent {

using JobLookup = std::function<std::optional<JobIdentity>(int64_t job_id)>;

struct LocalReply {
  int http_status = 200;
  std::string body;  // JSON
  int retry_after_s = 0;  // > 0: sent as Retry-After
};

class LocalApi {
 public:
  static constexpr size_t kMaxBodyBytes = 1024 * 1024;
  static constexpr size_t kMaxEventsPerPost = 1000;

  // `metrics_token_sha256`: hex SHA-256 of the metrics secret; empty for an agent without one,
  // which serves every scrape the public series only.
  LocalApi(JobLookup lookup, EventQueue* events, AgentMetrics* metrics,
           std::string metrics_token_sha256 = "");
  ~LocalApi();

  // Sees every accepted event (job id, the event object) before it is queued, e.g. to upload the
  // checkpoints jobs report. Set before Start.
  void SetEventObserver(std::function<void(int64_t job_id, const nlohmann::json& event)> fn) {
    observer_ = std::move(fn);
  }

  // `authorization` is the raw header value.
  LocalReply PostEvents(int64_t job_id, const std::string& authorization, const std::string& body);
  // Who a GET /metrics with this Authorization header value is served to.
  MetricsAudience MetricsAudienceFor(const std::string& authorization) const;

  // Binds host:port (port 0: any free port) and serves on a background thread.
  common::Result<int> Start(const std::string& host, int port);
  void Stop();

 private:
  JobLookup lookup_;
  EventQueue* events_;
  AgentMetrics* metrics_;
  const std::string metrics_token_sha256_;
  std::function<void(int64_t, const nlohmann::json&)> observer_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
};

}  // namespace agent
