// HttpEventReporter: posts job events to the node agent's job-local API from a background thread.
//
//   POST {agent_url}/v1/local/jobs/{job_id}/events
//   Authorization: Bearer {token}
//   {"events":[{...}, ...]}
//
// Post() only appends to a queue. The background thread sends whatever is queued as one request,
// at most once per flush interval, and once more when the reporter is closed, so a training step
// never waits for the network. A full queue drops its oldest events. Failed posts are logged at
// most once per minute and never stop training; the client and the error decoding are the shared
// ones (common/http/), kept out of every translation unit that includes Eigen; their events are dropped (step events are
// samples, the next ones supersede them).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "engine/report/event_sink.h"

namespace common::http {
class Client;
}

namespace engine {

struct ReporterConfig {
  std::string agent_url;  // "http://127.0.0.1:PORT", optionally with a path prefix
  std::string job_id;
  std::string token;
  std::string ca_file;  // https: the CAs the agent's certificate chains to; "": the system's
  double flush_interval_s = 0.2;
  double connect_timeout_s = 1.0;
  double io_timeout_s = 2.0;
  size_t max_queue = 10000;

  // embody-engine fills it from the launch environment (engine/jobs/job_context.h).
};

struct ReporterStats {
  int64_t posts_ok = 0;
  int64_t posts_failed = 0;
  int64_t events_sent = 0;
  int64_t events_dropped = 0;
};

class HttpEventReporter final : public EventSink {
 public:
  explicit HttpEventReporter(ReporterConfig config);
  ~HttpEventReporter() override;  // Close()s
  HttpEventReporter(const HttpEventReporter&) = delete;
  HttpEventReporter& operator=(const HttpEventReporter&) = delete;

  void Post(nlohmann::json event) override;
  // Sends what is queued and stops the thread. Idempotent. Takes at most about the timeouts.
  void Close();
  ReporterStats stats() const;

 private:
  void Run();
  void Send(common::http::Client& client, nlohmann::json events);

  const ReporterConfig config_;
  std::string path_;  // request path below the agent URL

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<nlohmann::json> queue_;
  bool stop_ = false;
  ReporterStats stats_;
  double last_error_log_s_ = -1e9;
  int64_t failures_since_log_ = 0;
  std::thread thread_;
};

}  // namespace engine
