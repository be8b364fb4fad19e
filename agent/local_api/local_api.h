// The job-local HTTP API and the agent's own endpoints, served on --listen (loopback by default).
//
//   POST /v1/local/jobs/{id}/events   Authorization: Bearer <EMBODY_JOB_TOKEN of job id>
//        body {"events":[{...}, ...]} or one event object; each event needs a string "type" and
//        must pass api::CheckJobEvent (size, depth, UTF-8 without NUL, typed known fields).
//        -> 202 {"accepted": N}; 401 wrong/missing token; 404 job not running here; 400 bad body
//        or a bad event (the message names it and why; nothing of the post is queued); 429 with
//        Retry-After when the event queue has no room (nothing queued). Every refused event is
//        counted in embody_agent_events_dropped_total{reason}.
//   GET  /metrics                     Prometheus text format: the agent's, the node's and its
//        GPUs' series, which name no job and no tenant (agent_metrics.h). Never 401: they are
//        public.
//   GET  /metrics/jobs/{id}           Authorization: Bearer <metrics secret> (--metrics-token-file):
//        the series of job id on this node, with no label naming the job, tenant or node (the
//        scrape config assigns them from the server's discovery). 200 with no series for a job
//        not running here; 401 without the secret; 404 from an agent started without one.
//   GET  /healthz                     "ok"
//   POST /v1/local/jobs/{id}/rsh      Authorization: Bearer <the job's token>, body
//        {"argv": [words...]}: the head node's `embody-agent rsh` asking this node to start Open
//        MPI's daemon for a job that has a part here (agent/rsh/rsh_bridge.h, docs/multinode.md).
//        -> 200 with a stream of frames (agent/rsh/rsh_protocol.h: output, a keepalive each second,
//        the exit status last); 404 no part of that job here; 401 wrong token; 400 not the
//        daemon; 409 its daemon already runs; 429 too many daemons on this node; 503 the job's
//        image is still being prepared here; 409 too when it cannot be (saying why). The
//        stream's end (the caller gone) stops the daemon.
//   GET  /v1/local/jobs/{id}/image    Authorization: Bearer <the job's token>: whether this node
//        has the image of an image job that has a part here (agent/rsh/rsh_bridge.h), which the
//        head's agent asks before it starts mpirun. -> 200 {"ready": true} (also for a job
//        without an image) or {"ready": false} (being prepared); 409 it cannot be prepared,
//        saying why; 404 / 401 as for rsh.
//
// Why a chunked response of cpp-httplib rather than Boost.Beast: a node runs one daemon per
// multi-node job it is part of, a handful, and this server already holds the agent's HTTP edge
// (request ids, access log, error bodies). Each stream holds one pool thread for the daemon's
// life, so the pool has the bridge's max_daemons threads more than the others need, and the
// bridge refuses past that: streams never starve the events and /metrics requests.
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

#include "agent/node/agent_metrics.h"
#include "agent/heartbeat/event_queue.h"
#include "agent/jobs/job_runner.h"
#include "common/status.h"

namespace httplib {
struct Response;
}
namespace common::http {
class GatedServer;
class ServerTls;
}

namespace agent {

class RshBridge;
class RemoteDaemon;

using JobLookup = std::function<std::optional<JobIdentity>(int64_t job_id)>;

struct LocalReply {
  int http_status = 200;
  std::string body;  // JSON
  int retry_after_s = 0;  // > 0: sent as Retry-After
};

class LocalApi {
 public:
  static constexpr size_t kMaxBodyBytes = 1024 * 1024;
  // Without a bearer token, bodies over this are refused unread (every route that takes one
  // needs a token).
  static constexpr size_t kAnonymousBodyBytes = 16 * 1024;
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
  // Whether a request with this Authorization header value may read jobs' series: it carries the
  // metrics secret (never, for an agent started without one).
  bool MayScrapeJobs(const std::string& authorization) const;

  // Serves the rsh route through `bridge` (which must outlive Stop), holding up to
  // `max_streams` streams at once. Set before Start.
  void SetRshBridge(RshBridge* bridge, int max_streams) {
    bridge_ = bridge;
    max_streams_ = max_streams;
  }

  // Serves every connection over TLS (common/http/server_tls.h). Set before Start.
  void SetTls(std::shared_ptr<const common::http::ServerTls> tls) { tls_ = std::move(tls); }

  // Binds host:port (port 0: any free port) and serves on a background thread.
  common::Result<int> Start(const std::string& host, int port);
  void Stop();

 private:
  void ServeDaemon(std::shared_ptr<RemoteDaemon> daemon, httplib::Response& res);

  JobLookup lookup_;
  EventQueue* events_;
  AgentMetrics* metrics_;
  const std::string metrics_token_sha256_;
  std::function<void(int64_t, const nlohmann::json&)> observer_;
  RshBridge* bridge_ = nullptr;
  int max_streams_ = 0;
  std::shared_ptr<const common::http::ServerTls> tls_;
  std::unique_ptr<common::http::GatedServer> server_;
  std::thread thread_;
};

}  // namespace agent
