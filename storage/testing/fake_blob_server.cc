#include "storage/testing/fake_blob_server.h"

#include <httplib.h>

#include <chrono>

#include "storage/checkpoint_source.h"

namespace storage::testing {

using nlohmann::json;

namespace {
void Error(httplib::Response& res, int status, const char* code, const std::string& msg,
           const std::string& field = "") {
  json e = {{"code", code}, {"message", msg}};
  if (!field.empty()) e["field"] = field;
  res.status = status;
  res.set_content(json{{"error", e}}.dump(), "application/json");
}
std::string HexSha(const std::string& s) {
  Sha256 h;
  h.Update(s.data(), s.size());
  return h.FinalHex();
}
}  // namespace

json FakeBlobServer::EntryJson(int64_t id, const Blob& b) const {
  return {{"id", id},
          {"job_id", b.job_id},
          {"step", b.step},
          {"bytes", b.bytes},
          {"sha256", b.sha256},
          {"metrics", b.metrics},
          {"state", b.ready ? "ready" : "uploading"},
          {"received_bytes", static_cast<int64_t>(b.data.size())}};
}

json FakeBlobServer::Uploads() const {
  std::lock_guard<std::mutex> lock(mu_);
  json out = json::array();
  for (const auto& [id, b] : blobs_) out.push_back(EntryJson(id, b));
  return out;
}

FakeBlobServer::FakeBlobServer() : server_(std::make_unique<httplib::Server>()) {
  httplib::Server& s = *server_;
  s.Post(R"(/v1/jobs/(\d+)/checkpoints)",
         [this](const httplib::Request& req, httplib::Response& res) {
           json j = json::parse(req.body, nullptr, false);
           if (!j.is_object()) return Error(res, 400, "invalid_argument", "bad body");
           std::lock_guard<std::mutex> lock(mu_);
           Blob b;
           b.job_id = std::stoll(req.matches[1]);
           b.step = j.value("step", int64_t{0});
           b.bytes = j.value("bytes", int64_t{0});
           b.sha256 = j.value("sha256", "");
           b.metrics = j.value("metrics", json::object());
           const int64_t id = next_id_++;
           blobs_[id] = b;
           res.status = 201;
           res.set_content(EntryJson(id, b).dump(), "application/json");
         });
  s.Put(R"(/v1/jobs/(\d+)/checkpoints/(\d+)/data)", [this](const httplib::Request& req,
                                                           httplib::Response& res) {
    ++puts;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = blobs_.find(std::stoll(req.matches[2]));
    if (it == blobs_.end() || it->second.ready) return Error(res, 404, "not_found", "no upload");
    if (fail_puts_before_append > 0) {
      --fail_puts_before_append;
      return Error(res, 503, "unavailable", "injected");
    }
    Blob& b = it->second;
    const int64_t offset = std::stoll(req.get_param_value("offset"));
    if (offset != static_cast<int64_t>(b.data.size())) {
      return Error(res, 409, "failed_precondition", "offset is not the bytes held");
    }
    if (HexSha(req.body) != req.get_header_value("X-Content-Sha256")) {
      return Error(res, 400, "invalid_argument", "chunk checksum mismatch", "X-Content-Sha256");
    }
    std::string chunk = req.body;
    if (corrupt_next_chunks > 0 && !chunk.empty()) {
      --corrupt_next_chunks;
      chunk[0] = static_cast<char>(chunk[0] ^ 0x5a);
    }
    b.data += chunk;
    if (fail_puts_after_append > 0) {
      --fail_puts_after_append;
      return Error(res, 503, "unavailable", "injected after append");
    }
    res.set_content(json{{"received_bytes", b.data.size()}}.dump(), "application/json");
  });
  s.Post(R"(/v1/jobs/(\d+)/checkpoints/(\d+)/commit)", [this](const httplib::Request& req,
                                                              httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = blobs_.find(std::stoll(req.matches[2]));
    if (it == blobs_.end()) return Error(res, 404, "not_found", "no upload");
    Blob& b = it->second;
    if (static_cast<int64_t>(b.data.size()) != b.bytes) {
      return Error(res, 409, "failed_precondition", "incomplete");
    }
    if (HexSha(b.data) != b.sha256) {
      blobs_.erase(it);
      return Error(res, 400, "invalid_argument", "sha256 mismatch; upload discarded", "sha256");
    }
    b.ready = true;
    res.set_content(EntryJson(it->first, b).dump(), "application/json");
  });
  s.Get(R"(/v1/jobs/(\d+)/checkpoints)",
        [this](const httplib::Request& req, httplib::Response& res) {
          std::lock_guard<std::mutex> lock(mu_);
          json list = json::array();
          for (const auto& [id, b] : blobs_) {
            if (b.ready && b.job_id == std::stoll(req.matches[1])) list.push_back(EntryJson(id, b));
          }
          res.set_content(json{{"checkpoints", list}}.dump(), "application/json");
        });
  s.Get(R"(/v1/jobs/(\d+)/checkpoints/(\d+))",
        [this](const httplib::Request& req, httplib::Response& res) {
          std::lock_guard<std::mutex> lock(mu_);
          auto it = blobs_.find(std::stoll(req.matches[2]));
          if (it == blobs_.end()) return Error(res, 404, "not_found", "no checkpoint");
          res.set_content(EntryJson(it->first, it->second).dump(), "application/json");
        });
  s.Delete(R"(/v1/jobs/(\d+)/checkpoints/(\d+))",
           [this](const httplib::Request& req, httplib::Response& res) {
             std::lock_guard<std::mutex> lock(mu_);
             if (blobs_.erase(std::stoll(req.matches[2])) == 0) {
               return Error(res, 404, "not_found", "no checkpoint");
             }
             res.set_content("{}", "application/json");
           });
  s.Get(R"(/v1/jobs/(\d+)/checkpoints/(\d+)/data)",
        [this](const httplib::Request& req, httplib::Response& res) {
          std::string data;
          {
            std::lock_guard<std::mutex> lock(mu_);
            auto it = blobs_.find(std::stoll(req.matches[2]));
            if (it == blobs_.end() || !it->second.ready) {
              return Error(res, 404, "not_found", "no checkpoint");
            }
            data = it->second.data;
          }
          // httplib applies the Range header itself (206, Content-Range) to a provider's content;
          // the provider is asked for absolute offsets.
          const bool cut = cut_downloads > 0 && data.size() > 1;
          if (cut) --cut_downloads;
          const size_t total = data.size();
          res.set_content_provider(
              total, "application/octet-stream",
              [data = std::move(data), cut, first = int64_t{-1}](size_t offset, size_t length,
                                                                 httplib::DataSink& sink) mutable {
                if (first < 0) first = static_cast<int64_t>(offset);
                const size_t stop = cut ? first + (data.size() - first) / 2 : data.size();
                if (offset >= stop) return false;  // drop the connection
                sink.write(data.data() + offset, std::min(length, stop - offset));
                return true;
              });
        });
  server_->set_tcp_nodelay(true);  // a reply's headers and body go out apart (client.h)
  port_ = server_->bind_to_any_port("127.0.0.1");
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  while (!server_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

FakeBlobServer::~FakeBlobServer() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace storage::testing
