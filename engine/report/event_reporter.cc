#include "engine/report/event_reporter.h"

#include <chrono>
#include <memory>
#include <utility>

#include "common/http/client.h"
#include "common/log.h"
#include "common/time_util.h"

namespace engine {

HttpEventReporter::HttpEventReporter(ReporterConfig config) : config_(std::move(config)) {
  // The client puts the URL's path prefix, if any, before this.
  path_ = "/v1/local/jobs/" + config_.job_id + "/events";
  thread_ = std::thread([this] { Run(); });
}

HttpEventReporter::~HttpEventReporter() { Close(); }

void HttpEventReporter::Post(nlohmann::json event) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_) return;
  queue_.push_back(std::move(event));
  while (queue_.size() > config_.max_queue) {
    queue_.pop_front();
    ++stats_.events_dropped;
  }
}

void HttpEventReporter::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

ReporterStats HttpEventReporter::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void HttpEventReporter::Run() {
  const auto interval = std::chrono::duration<double>(config_.flush_interval_s);
  // One client for the reporter's life: it keeps the connection to the agent alive between posts.
  // A URL httplib cannot use (bad scheme) makes every event a dropped one, logged once.
  std::unique_ptr<common::http::Client> client;
  common::http::ClientOptions options;
  options.base_url = config_.agent_url;
  options.connect_timeout_s = config_.connect_timeout_s;
  options.read_timeout_s = config_.io_timeout_s;
  options.write_timeout_s = config_.io_timeout_s;
  options.bearer_token = config_.token;
  options.ca_file = config_.ca_file;
  auto made = common::http::Client::Create(std::move(options));
  if (made.ok()) {
    client = std::move(*made);
  } else {
    common::LogError("cannot post job events: bad EMBODY_AGENT_URL or EMBODY_CA_FILE",
                     {{"url", config_.agent_url}, {"error", made.status().ToString()}});
  }
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait_for(lock, interval, [this] { return stop_; });
    bool stopping = stop_;
    if (!queue_.empty()) {
      nlohmann::json batch = nlohmann::json::array();
      for (auto& e : queue_) batch.push_back(std::move(e));
      queue_.clear();
      if (client != nullptr) {
        lock.unlock();
        Send(*client, std::move(batch));
        lock.lock();
      } else {
        stats_.events_dropped += static_cast<int64_t>(batch.size());
      }
    }
    if (stopping && queue_.empty()) return;
  }
}

void HttpEventReporter::Send(common::http::Client& client, nlohmann::json events) {
  const size_t n = events.size();
  common::http::Request req;
  req.method = "POST";
  req.path = path_;
  req.body = nlohmann::json{{"events", std::move(events)}}.dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string error;
  try {
    auto res = client.Call(req);
    if (!res.ok()) error = res.status().ToString();
  } catch (const std::exception& e) {
    error = std::string("exception: ") + e.what();
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (error.empty()) {
    ++stats_.posts_ok;
    stats_.events_sent += static_cast<int64_t>(n);
    return;
  }
  ++stats_.posts_failed;
  stats_.events_dropped += static_cast<int64_t>(n);
  ++failures_since_log_;
  double now = common::MonotonicSeconds();
  if (now - last_error_log_s_ >= 60.0) {
    common::LogWarn("posting job events to the agent failed; training continues",
                    {{"url", config_.agent_url + path_},
                     {"error", error},
                     {"failures_since_last_log", std::to_string(failures_since_log_)}});
    last_error_log_s_ = now;
    failures_since_log_ = 0;
  }
}

}  // namespace engine
