// HttpCheckpointStore: checkpoints in embody-server's blob store (docs/checkpoints.md).
//
//   POST   /v1/jobs/{job}/checkpoints                 {"step","bytes","sha256","metrics"} -> id
//   PUT    /v1/jobs/{job}/checkpoints/{id}/data?offset=N   one chunk, X-Content-Sha256: <hex>
//   GET    /v1/jobs/{job}/checkpoints/{id}            the entry, with received_bytes
//   POST   /v1/jobs/{job}/checkpoints/{id}/commit     the server checks size and SHA-256
//   GET    /v1/jobs/{job}/checkpoints                 committed ("ready") entries
//   GET    /v1/jobs/{job}/checkpoints/{id}/data       the bytes; Range: bytes=N- resumes
//   DELETE /v1/jobs/{job}/checkpoints/{id}
//
// The bytes go through common::http::BlobClient (blob_client.h): Put uploads in chunks of
// `chunk_bytes`, each with its own SHA-256, and after a failed chunk asks the server how many
// bytes it holds (the entry's received_bytes) and goes on from there, up to `max_retries`
// failures in a row; an upload given up is deleted (best effort). The commit makes the server
// check the whole file's SHA-256; until it succeeds the checkpoint is not listed. Get streams the
// bytes to an atomic file (common/env.h), resumes an interrupted download with Range, and renames
// the file into place only after its SHA-256 matched. Errors decode as every client's do
// (common/http/status_http.h). Thread-safe: each call uses its own connection.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "common/http/blob_client.h"
#include "storage/checkpoint_store.h"

namespace storage {

struct HttpCheckpointStoreOptions {
  std::string server_url;  // http://host:port or https://host:port
  std::string ca_file;     // https: the CAs the server must chain to; "": the system's
  // Called for every request: the current bearer credential (an agent's node credential may be
  // replaced while it runs).
  std::function<std::string()> token;
  size_t chunk_bytes = 4 << 20;  // the server refuses chunks over 8 MiB
  int max_retries = 5;
  std::chrono::milliseconds first_backoff{200};
  std::chrono::seconds timeout{60};
};

class HttpCheckpointStore : public CheckpointStore {
 public:
  explicit HttpCheckpointStore(HttpCheckpointStoreOptions options);

  common::Result<CheckpointInfo> Put(int64_t job_id, int64_t step, const nlohmann::json& metrics,
                                     CheckpointSource& file) override;
  common::Result<std::vector<CheckpointInfo>> List(int64_t job_id) override;
  common::Result<CheckpointInfo> Get(int64_t job_id, int64_t id,
                                     const std::string& local_path) override;
  common::Status Delete(int64_t job_id, int64_t id) override;

  // The server's entry for one checkpoint, whatever its state (for resuming an upload).
  common::Result<nlohmann::json> Entry(int64_t job_id, int64_t id);

 private:
  common::Result<std::unique_ptr<common::http::Client>> Connect() const;
  common::http::BlobOptions BlobOptions() const;

  HttpCheckpointStoreOptions options_;
};

// A checkpoint entry as the server writes it (docs/checkpoints.md) -> CheckpointInfo.
common::Result<CheckpointInfo> CheckpointInfoFromJson(const nlohmann::json& j);

}  // namespace storage
