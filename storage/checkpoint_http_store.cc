#include "storage/checkpoint_http_store.h"

#include <httplib.h>

#include <algorithm>
#include <thread>

#include "common/http/client.h"
#include "storage/atomic_file.h"

namespace storage {

using common::Result;
using common::Status;
using nlohmann::json;

namespace {

// An error reply ({"error":{"code","message","field"}}) as a Status; a connection failure or a
// reply that is not ours is unavailable, which the callers retry.
Status StatusOf(int http_status, const std::string& body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_object()) {
    const json& e = j["error"];
    auto code = common::CodeFromName(e.value("code", ""));
    if (code) return Status(*code, e.value("message", ""), e.value("field", ""));
  }
  if (http_status >= 500 || http_status == 0) {
    return common::Unavailable("HTTP " + std::to_string(http_status));
  }
  return common::Internal("HTTP " + std::to_string(http_status) + ": " + body.substr(0, 200));
}

bool Retryable(const Status& st) { return st.code() == common::Code::kUnavailable; }

std::string JobPath(int64_t job_id) {
  return "/v1/jobs/" + std::to_string(job_id) + "/checkpoints";
}

}  // namespace

struct HttpCheckpointStore::Reply {
  int status = 0;
  std::string body;
  Status error;  // ok for 2xx
  json Json() const { return json::parse(body, nullptr, false); }
};

Result<CheckpointInfo> CheckpointInfoFromJson(const json& j) {
  if (!j.is_object() || !j.contains("id") || !j["id"].is_number_integer() || !j.contains("step") ||
      !j["step"].is_number_integer() || !j.contains("bytes") || !j["bytes"].is_number_integer()) {
    return common::Internal("malformed checkpoint entry from the server");
  }
  CheckpointInfo c;
  c.id = j["id"];
  c.job_id = j.value("job_id", int64_t{0});
  c.step = j["step"];
  c.bytes = j["bytes"];
  c.sha256 = j.value("sha256", "");
  if (j.contains("metrics") && j["metrics"].is_object()) c.metrics = j["metrics"];
  c.created_ms = j.value("created_ms", int64_t{0});
  return c;
}

HttpCheckpointStore::HttpCheckpointStore(HttpCheckpointStoreOptions options)
    : options_(std::move(options)) {}

HttpCheckpointStore::Reply HttpCheckpointStore::Call(
    const std::string& method, const std::string& path, const std::string& body,
    const std::string& content_type,
    const std::vector<std::pair<std::string, std::string>>& extra) {
  httplib::Client cli(options_.server_url);
  Reply r;
  r.error = common::http::VerifyServer(cli, options_.server_url, options_.ca_file);
  if (!r.error.ok()) return r;
  cli.set_connection_timeout(10, 0);
  cli.set_read_timeout(options_.timeout.count(), 0);
  cli.set_write_timeout(options_.timeout.count(), 0);
  cli.set_tcp_nodelay(true);
  httplib::Headers headers;
  if (options_.token) headers.emplace("Authorization", "Bearer " + options_.token());
  for (const auto& [k, v] : extra) headers.emplace(k, v);
  httplib::Result res = method == "GET"      ? cli.Get(path, headers)
                        : method == "PUT"    ? cli.Put(path, headers, body, content_type)
                        : method == "DELETE" ? cli.Delete(path, headers)
                                             : cli.Post(path, headers, body, content_type);
  if (!res) {
    r.error = common::Unavailable("cannot reach " + options_.server_url + path + ": " +
                                  httplib::to_string(res.error()));
    return r;
  }
  r.status = res->status;
  r.body = std::move(res->body);
  if (r.status < 200 || r.status >= 300) r.error = StatusOf(r.status, r.body);
  return r;
}

void HttpCheckpointStore::Backoff(int attempt) const {
  std::this_thread::sleep_for(options_.first_backoff * (1 << std::min(attempt, 6)));
}

Result<json> HttpCheckpointStore::Entry(int64_t job_id, int64_t id) {
  Reply r = Call("GET", JobPath(job_id) + "/" + std::to_string(id), "", "", {});
  if (!r.error.ok()) return r.error;
  json j = r.Json();
  if (!j.is_object()) return common::Internal("malformed checkpoint entry from the server");
  return j;
}

Status HttpCheckpointStore::UploadChunks(int64_t job_id, int64_t id, CheckpointSource& file) {
  const std::string data_path = JobPath(job_id) + "/" + std::to_string(id) + "/data";
  int64_t offset = 0;
  int failures = 0;
  while (offset < file.size()) {
    EMBODY_ASSIGN_OR_RETURN(chunk, file.ReadAt(offset, options_.chunk_bytes));
    Sha256 h;
    h.Update(chunk.data(), chunk.size());
    Reply r = Call("PUT", data_path + "?offset=" + std::to_string(offset), chunk,
                   "application/octet-stream", {{"X-Content-Sha256", h.FinalHex()}});
    if (r.error.ok()) {
      json j = r.Json();
      offset = j.is_object() ? j.value("received_bytes", offset + int64_t(chunk.size()))
                             : offset + static_cast<int64_t>(chunk.size());
      failures = 0;
      continue;
    }
    // Refusals that another try cannot fix end the upload; anything else (lost connection, 5xx,
    // a chunk damaged on the way, an offset the server does not hold) resumes from what the
    // server says it has.
    const common::Code c = r.error.code();
    const bool resumable =
        Retryable(r.error) || c == common::Code::kFailedPrecondition ||
        (c == common::Code::kInvalidArgument && r.error.field() == "X-Content-Sha256");
    if (!resumable || ++failures > options_.max_retries) return r.error;
    Backoff(failures - 1);
    auto entry = Entry(job_id, id);
    if (!entry.ok()) {
      if (!Retryable(entry.status())) return entry.status();
      continue;  // try the same offset again
    }
    offset = entry->value("received_bytes", offset);
    if (offset < 0 || offset > file.size()) {
      return common::Internal("server holds " + std::to_string(offset) + " bytes of a " +
                              std::to_string(file.size()) + "-byte checkpoint");
    }
  }
  return Status::Ok();
}

Result<CheckpointInfo> HttpCheckpointStore::Put(int64_t job_id, int64_t step, const json& metrics,
                                                CheckpointSource& file) {
  // null ({} in a call) means no metrics.
  if (!metrics.is_object() && !metrics.is_null()) {
    return common::InvalidArgument("metrics must be an object");
  }
  const nlohmann::json metrics_object = metrics.is_null() ? nlohmann::json::object() : metrics;
  EMBODY_ASSIGN_OR_RETURN(sha, file.Sha256Hex());
  json start = {
      {"step", step}, {"bytes", file.size()}, {"sha256", sha}, {"metrics", metrics_object}};
  Reply r;
  for (int attempt = 0;; ++attempt) {
    r = Call("POST", JobPath(job_id), start.dump(), "application/json", {});
    if (r.error.ok() || !Retryable(r.error) || attempt >= options_.max_retries) break;
    Backoff(attempt);
  }
  if (!r.error.ok()) return r.error;
  json created = r.Json();
  if (!created.is_object() || !created.contains("id") || !created["id"].is_number_integer()) {
    return common::Internal("malformed reply to starting an upload");
  }
  const int64_t id = created["id"];
  if (Status st = UploadChunks(job_id, id, file); !st.ok()) {
    // Given up: the partial upload would count against the tenant's quota until the server's
    // sweep; remove it now if the server can be reached (it is never listed either way).
    (void)Delete(job_id, id);
    return st;
  }
  const std::string commit_path = JobPath(job_id) + "/" + std::to_string(id) + "/commit";
  for (int attempt = 0;; ++attempt) {
    r = Call("POST", commit_path, json{{"sha256", sha}}.dump(), "application/json", {});
    if (r.error.ok() || !Retryable(r.error) || attempt >= options_.max_retries) break;
    Backoff(attempt);
  }
  if (!r.error.ok()) return r.error;
  return CheckpointInfoFromJson(r.Json());
}

Result<std::vector<CheckpointInfo>> HttpCheckpointStore::List(int64_t job_id) {
  Reply r = Call("GET", JobPath(job_id), "", "", {});
  if (!r.error.ok()) return r.error;
  json j = r.Json();
  if (!j.is_object() || !j.contains("checkpoints") || !j["checkpoints"].is_array()) {
    return common::Internal("malformed checkpoint list from the server");
  }
  std::vector<CheckpointInfo> out;
  for (const json& e : j["checkpoints"]) {
    EMBODY_ASSIGN_OR_RETURN(c, CheckpointInfoFromJson(e));
    out.push_back(std::move(c));
  }
  std::sort(out.begin(), out.end(),
            [](const CheckpointInfo& a, const CheckpointInfo& b) { return a.step < b.step; });
  return out;
}

Result<CheckpointInfo> HttpCheckpointStore::Get(int64_t job_id, int64_t id,
                                                const std::string& local_path) {
  EMBODY_ASSIGN_OR_RETURN(entry, Entry(job_id, id));
  EMBODY_ASSIGN_OR_RETURN(info, CheckpointInfoFromJson(entry));
  if (entry.value("state", "") != "ready") {
    return common::NotFound("checkpoint " + std::to_string(id) + " is not committed");
  }
  if (info.bytes < 0 || info.bytes > kMaxCheckpointBytes) {
    return common::Internal("checkpoint size out of range");
  }
  EMBODY_ASSIGN_OR_RETURN(out, AtomicFileWriter::Create(local_path, 0644));
  Sha256 h;
  Status write_error;
  int failures = 0;
  const std::string path = JobPath(job_id) + "/" + std::to_string(id) + "/data";
  while (out->written() < info.bytes) {
    httplib::Client cli(options_.server_url);
    if (Status secure = common::http::VerifyServer(cli, options_.server_url, options_.ca_file);
        !secure.ok()) {
      return secure;
    }
    cli.set_connection_timeout(10, 0);
    cli.set_read_timeout(options_.timeout.count(), 0);
    httplib::Headers headers;
    if (options_.token) headers.emplace("Authorization", "Bearer " + options_.token());
    const int64_t from = out->written();
    headers.emplace("Range", "bytes=" + std::to_string(from) + "-");
    int status = 0;
    auto res = cli.Get(
        path, headers,
        [&](const httplib::Response& resp) {
          status = resp.status;
          // A server that ignored the Range would send the file from its start again.
          return status == 206 || (status == 200 && from == 0);
        },
        [&](const char* data, size_t n) {
          if (out->written() + static_cast<int64_t>(n) > info.bytes) {
            write_error = common::Internal("server sent more bytes than the checkpoint holds");
            return false;
          }
          h.Update(data, n);
          write_error = out->Append(data, n);
          return write_error.ok();
        });
    if (!write_error.ok()) return write_error;
    const bool whole = status == 206 || (status == 200 && from == 0);
    if (res && whole) {
      failures = 0;
      if (out->written() == from) return common::Internal("download made no progress");
      continue;
    }
    // The receiver turned the reply away (an error status): its body was not read, so the
    // status alone says what happened.
    Status st =
        status == 0
            ? common::Unavailable("download of checkpoint " + std::to_string(id) + " interrupted")
        : status == 404 ? common::NotFound("checkpoint " + std::to_string(id) + " not found")
        : status == 401 ? Status(common::Code::kUnauthenticated, "download refused (401)")
        : status == 403 ? Status(common::Code::kPermissionDenied, "download refused (403)")
        : status >= 500 || whole
            ? common::Unavailable("download failed with HTTP " + std::to_string(status))
            : common::Internal("download failed with HTTP " + std::to_string(status));
    if (!Retryable(st) || ++failures > options_.max_retries) return st;
    Backoff(failures - 1);
  }
  if (h.FinalHex() != info.sha256) {
    return common::Status(common::Code::kFailedPrecondition,
                          "checkpoint " + std::to_string(id) + " fails its SHA-256 check");
  }
  EMBODY_RETURN_IF_ERROR(out->Commit());
  return info;
}

Status HttpCheckpointStore::Delete(int64_t job_id, int64_t id) {
  Reply r = Call("DELETE", JobPath(job_id) + "/" + std::to_string(id), "", "", {});
  return r.error;
}

}  // namespace storage
