#include "agent/data/checkpoint_uploader.h"

#include <cmath>
#include <filesystem>

#include "common/log.h"

namespace agent {

namespace {
constexpr size_t kMaxJobsRemembered = 1024;
constexpr size_t kMaxMetrics = 32;

bool MetricName(const std::string& k) {
  if (k.empty() || k.size() > 64 || k[0] < 'a' || k[0] > 'z') return false;
  for (char c : k) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}
}  // namespace

nlohmann::json CheckpointMetrics(const nlohmann::json& event) {
  nlohmann::json out = nlohmann::json::object();
  if (!event.is_object()) return out;
  for (const auto& [k, v] : event.items()) {
    if (out.size() >= kMaxMetrics) break;
    if (k == "step" || k == "steps" || !MetricName(k) || !v.is_number()) continue;
    if (!std::isfinite(v.get<double>())) continue;
    out[k] = v;
  }
  return out;
}

CheckpointUploader::CheckpointUploader(CheckpointUploaderOptions options,
                                       storage::CheckpointStore* store)
    : options_(std::move(options)), store_(store), worker_([this] { Run(); }) {}

CheckpointUploader::~CheckpointUploader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void CheckpointUploader::Observe(int64_t job_id, const nlohmann::json& event) {
  const std::string type = event.value("type", "");
  std::lock_guard<std::mutex> lock(mu_);
  if (type == "step") {
    if (last_step_.size() >= kMaxJobsRemembered && !last_step_.count(job_id)) {
      last_step_.erase(last_step_.begin());
    }
    last_step_[job_id] = event;
    return;
  }
  if (type != "checkpoint") return;
  auto step = event.find("step");
  auto path = event.find("path");
  if (step == event.end() || !step->is_number_integer() || step->get<int64_t>() < 0 ||
      path == event.end() || !path->is_string()) {
    return;
  }
  Pending p{job_id, step->get<int64_t>(), path->get<std::string>(), nlohmann::json::object()};
  if (event.contains("metrics") && event["metrics"].is_object()) {
    p.metrics = CheckpointMetrics(event["metrics"]);
  } else if (auto it = last_step_.find(job_id);
             it != last_step_.end() && it->second.value("step", int64_t{-1}) == p.step) {
    p.metrics = CheckpointMetrics(it->second);
  }
  // A newer checkpoint of the job supersedes one still waiting: the engine keeps only its newest
  // few on disk, so the older file is likely gone by the time its turn comes.
  std::erase_if(queue_, [&](const Pending& q) { return q.job_id == job_id && q.step < p.step; });
  if (queue_.size() >= options_.max_pending) {
    common::LogWarn("checkpoint upload queue full; dropping the oldest",
                    {{"job", std::to_string(queue_.front().job_id)},
                     {"step", std::to_string(queue_.front().step)}});
    queue_.pop_front();
    ++failed_;
  }
  queue_.push_back(std::move(p));
  cv_.notify_all();
}

common::Status CheckpointUploader::UploadNow(int64_t job_id, int64_t step, const std::string& path,
                                             const nlohmann::json& metrics) {
  namespace fs = std::filesystem;
  // The job's own directory, as the agent made it; the reported path must name a file in it.
  const fs::path dir =
      fs::absolute(options_.checkpoints_root + "/job-" + std::to_string(job_id)).lexically_normal();
  const fs::path file = fs::path(path).lexically_normal();
  if (!file.is_absolute() || file.parent_path() != dir || !file.has_filename()) {
    return common::InvalidArgument("checkpoint path " + path + " is not in the job's directory " +
                                   dir.string());
  }
  EMBODY_ASSIGN_OR_RETURN(src, storage::CheckpointSource::OpenInDir(
                                   dir.string(), file.filename().string(), options_.max_bytes));
  EMBODY_ASSIGN_OR_RETURN(info, store_->Put(job_id, step, metrics, *src));
  common::LogInfo("checkpoint uploaded", {{"job", std::to_string(job_id)},
                                          {"step", std::to_string(step)},
                                          {"checkpoint", std::to_string(info.id)},
                                          {"bytes", std::to_string(info.bytes)}});
  return common::Status::Ok();
}

void CheckpointUploader::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    Pending p = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    common::Status st = UploadNow(p.job_id, p.step, p.path, p.metrics);
    if (!st.ok()) {
      common::LogWarn("checkpoint not uploaded", {{"job", std::to_string(p.job_id)},
                                                  {"step", std::to_string(p.step)},
                                                  {"error", st.ToString()}});
    }
    lock.lock();
    busy_ = false;
    (st.ok() ? uploaded_ : failed_)++;
    cv_.notify_all();
  }
}

bool CheckpointUploader::WaitIdle(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [this] { return queue_.empty() && !busy_; });
}

uint64_t CheckpointUploader::uploaded() const {
  std::lock_guard<std::mutex> lock(mu_);
  return uploaded_;
}

uint64_t CheckpointUploader::failed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_;
}

}  // namespace agent
