#include "engine/report/event_reporter.h"

#include <httplib.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <utility>

#include "common/log.h"
#include "common/time_util.h"

namespace engine {

std::optional<ReporterConfig> ReporterConfig::FromEnv() {
  auto get = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v != nullptr ? v : "");
  };
  ReporterConfig c;
  c.agent_url = get("EMBODY_AGENT_URL");
  if (c.agent_url.empty()) return std::nullopt;
  c.job_id = get("EMBODY_JOB_ID");
  c.token = get("EMBODY_JOB_TOKEN");
  return c;
}

HttpEventReporter::HttpEventReporter(ReporterConfig config) : config_(std::move(config)) {
  // Split "http://host:port/prefix" into the client's base and the request path.
  std::string url = config_.agent_url;
  while (!url.empty() && url.back() == '/') url.pop_back();
  size_t scheme_end = url.find("://");
  size_t path_start = url.find('/', scheme_end == std::string::npos ? 0 : scheme_end + 3);
  host_ = url.substr(0, path_start);
  std::string prefix = path_start == std::string::npos ? "" : url.substr(path_start);
  path_ = prefix + "/v1/local/jobs/" + config_.job_id + "/events";
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
  std::unique_ptr<httplib::Client> client;
  try {
    client = std::make_unique<httplib::Client>(host_);
    auto usec = [](double s) { return static_cast<time_t>(s * 1e6); };
    client->set_connection_timeout(0, usec(config_.connect_timeout_s));
    client->set_read_timeout(0, usec(config_.io_timeout_s));
    client->set_write_timeout(0, usec(config_.io_timeout_s));
    // httplib writes headers and body apart: without this, Nagle's algorithm and the agent's
    // delayed ACK hold every post for ~40 ms.
    client->set_tcp_nodelay(true);
    client->set_bearer_token_auth(config_.token);
    client->set_keep_alive(true);
  } catch (const std::exception& e) {
    common::LogError("cannot post job events: bad EMBODY_AGENT_URL",
                     {{"url", config_.agent_url}, {"error", e.what()}});
    client.reset();
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

void HttpEventReporter::Send(httplib::Client& client, nlohmann::json events) {
  const size_t n = events.size();
  std::string body = nlohmann::json{{"events", std::move(events)}}.dump();
  std::string error;
  try {
    auto res = client.Post(path_, body, "application/json");
    if (!res) {
      error = "request failed: " + httplib::to_string(res.error());
    } else if (res->status < 200 || res->status >= 300) {
      error = "agent answered " + std::to_string(res->status) + ": " + res->body.substr(0, 200);
    }
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
                    {{"url", host_ + path_},
                     {"error", error},
                     {"failures_since_last_log", std::to_string(failures_since_log_)}});
    last_error_log_s_ = now;
    failures_since_log_ = 0;
  }
}

}  // namespace engine
