#include "storage/checkpoint_http_store.h"

#include <algorithm>

#include "common/env.h"
#include "common/http/blob_client.h"

namespace storage {

using common::Result;
using common::Status;
using common::http::BlobClient;
using common::http::Request;
using nlohmann::json;

namespace {

std::string JobPath(int64_t job_id) {
  return "/v1/jobs/" + std::to_string(job_id) + "/checkpoints";
}
std::string EntryPath(int64_t job_id, int64_t id) {
  return JobPath(job_id) + "/" + std::to_string(id);
}

Request JsonRequest(std::string method, std::string path, const json& body = nullptr) {
  Request r;
  r.method = std::move(method);
  r.path = std::move(path);
  if (!body.is_null()) r.body = body.dump();
  return r;
}

Result<json> JsonObject(const common::http::Response& r, const char* what) {
  json j = json::parse(r.body, nullptr, false);
  if (!j.is_object())
    return common::Internal(std::string("malformed ") + what + " from the server");
  return j;
}

}  // namespace

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

// A client per call: calls on several threads each get their own connection.
Result<std::unique_ptr<common::http::Client>> HttpCheckpointStore::Connect() const {
  common::http::ClientOptions o;
  o.base_url = options_.server_url;
  o.ca_file = options_.ca_file;
  o.connect_timeout_s = 10;
  o.read_timeout_s = o.write_timeout_s = static_cast<double>(options_.timeout.count());
  o.bearer_token_source = options_.token;
  return common::http::Client::Create(o);
}

common::http::BlobOptions HttpCheckpointStore::BlobOptions() const {
  common::http::BlobOptions b;
  b.chunk_bytes = options_.chunk_bytes;
  b.max_retries = options_.max_retries;
  b.first_backoff = options_.first_backoff;
  return b;
}

Result<json> HttpCheckpointStore::Entry(int64_t job_id, int64_t id) {
  EMBODY_ASSIGN_OR_RETURN(client, Connect());
  EMBODY_ASSIGN_OR_RETURN(r, client->Call(JsonRequest("GET", EntryPath(job_id, id))));
  return JsonObject(r, "checkpoint entry");
}

Result<CheckpointInfo> HttpCheckpointStore::Put(int64_t job_id, int64_t step, const json& metrics,
                                                CheckpointSource& file) {
  // null ({} in a call) means no metrics.
  if (!metrics.is_object() && !metrics.is_null()) {
    return common::InvalidArgument("metrics must be an object");
  }
  const json metrics_object = metrics.is_null() ? json::object() : metrics;
  EMBODY_ASSIGN_OR_RETURN(sha, file.Sha256Hex());
  EMBODY_ASSIGN_OR_RETURN(client, Connect());
  BlobClient blob(*client, BlobOptions());
  const json start = {
      {"step", step}, {"bytes", file.size()}, {"sha256", sha}, {"metrics", metrics_object}};
  EMBODY_ASSIGN_OR_RETURN(started, blob.CallWithRetry(JsonRequest("POST", JobPath(job_id), start)));
  EMBODY_ASSIGN_OR_RETURN(created, JsonObject(started, "reply to starting an upload"));
  if (!created.contains("id") || !created["id"].is_number_integer()) {
    return common::Internal("malformed reply to starting an upload");
  }
  const int64_t id = created["id"];
  Status sent = blob.Upload(
      EntryPath(job_id, id) + "/data", file.size(), 0,
      [&file](int64_t offset, size_t n) { return file.ReadAt(offset, n); },
      [&]() -> Result<int64_t> {
        EMBODY_ASSIGN_OR_RETURN(r, client->Call(JsonRequest("GET", EntryPath(job_id, id))));
        EMBODY_ASSIGN_OR_RETURN(entry, JsonObject(r, "checkpoint entry"));
        return entry.value("received_bytes", int64_t{-1});
      });
  if (!sent.ok()) {
    // Given up: the partial upload would count against the tenant's quota until the server's
    // sweep; remove it now if the server can be reached (it is never listed either way).
    (void)Delete(job_id, id);
    return sent;
  }
  EMBODY_ASSIGN_OR_RETURN(
      committed, blob.CallWithRetry(
                     JsonRequest("POST", EntryPath(job_id, id) + "/commit", {{"sha256", sha}})));
  EMBODY_ASSIGN_OR_RETURN(entry, JsonObject(committed, "checkpoint entry"));
  return CheckpointInfoFromJson(entry);
}

Result<std::vector<CheckpointInfo>> HttpCheckpointStore::List(int64_t job_id) {
  EMBODY_ASSIGN_OR_RETURN(client, Connect());
  EMBODY_ASSIGN_OR_RETURN(r, client->Call(JsonRequest("GET", JobPath(job_id))));
  json j = json::parse(r.body, nullptr, false);
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
  // Verified before it is renamed into place: a corrupt copy never appears at local_path.
  EMBODY_ASSIGN_OR_RETURN(out, common::Env::Default()->NewAtomicFile(local_path, {}));
  EMBODY_ASSIGN_OR_RETURN(client, Connect());
  BlobClient blob(*client, BlobOptions());
  EMBODY_RETURN_IF_ERROR(blob.Download(
      EntryPath(job_id, id) + "/data", info.bytes, info.sha256, "checkpoint " + std::to_string(id),
      [&out](const char* data, size_t n) { return out->Append(data, n); }));
  EMBODY_RETURN_IF_ERROR(out->Commit());
  return info;
}

Status HttpCheckpointStore::Delete(int64_t job_id, int64_t id) {
  EMBODY_ASSIGN_OR_RETURN(client, Connect());
  return client->Call(JsonRequest("DELETE", EntryPath(job_id, id))).status();
}

}  // namespace storage
