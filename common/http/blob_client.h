// BlobClient: the one client side of a blob transfer to or from embody-server, used by the
// checkpoint store (storage/checkpoint_http_store.h), the CLI's dataset upload
// (cli/dataset_upload.h) and the agent's fetch of an upload (agent/data/dataset_upload_fetch.h). The
// routes and the resource around the bytes (creating it, committing it) stay with each caller;
// what every blob shares is here, on top of Client, so errors decode one way (status_http.h: a
// bare 404 is not_found whoever answers it).
//
// Upload: the bytes go in chunks, `PUT <data path>?offset=N` with X-Content-Sha256 (the chunk's
// SHA-256, so a chunk damaged on the way is refused before it is stored); the server answers
// {"received_bytes": N}. After a failure another try can fix (no answer, 5xx, an offset the server
// does not hold, a damaged chunk), it pauses, asks the caller's `received` how many bytes the
// server holds, and goes on from there, up to max_retries failures in a row.
//
// Download: `GET <path>` with `Range: bytes=N-`, the bytes handed to a sink; an interrupted answer
// (no answer, cut short, 5xx) resumes from the bytes taken, up to max_retries failures in a row.
// The size and SHA-256 are checked: the call succeeds only when the sink got exactly the blob.
//
// A BlobClient uses one Client and so serves one transfer at a time.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "common/http/client.h"
#include "common/status.h"

namespace common::http {

struct BlobOptions {
  size_t chunk_bytes = 4 << 20;                  // embody-server refuses chunks over 8 MiB
  int max_retries = 5;                           // failures in a row before a transfer gives up
  std::chrono::milliseconds first_backoff{200};  // doubled after each failure in a row
};

// Bytes [offset, offset + n) of what is uploaded; fewer only at its end.
using BlobRead = std::function<Result<std::string>(int64_t offset, size_t n)>;

class BlobClient {
 public:
  BlobClient(Client& client, BlobOptions options) : client_(client), options_(options) {}

  // Sends bytes [offset, size) read by `read` to `data_path`. `received` asks the server how many
  // bytes it holds (the resource's received_bytes); `progress`, if set, hears the offset reached
  // after each chunk. The first failure that another try cannot fix is returned as it is.
  Status Upload(const std::string& data_path, int64_t size, int64_t offset, const BlobRead& read,
                const std::function<Result<int64_t>()>& received,
                const std::function<void(int64_t)>& progress = nullptr);

  // Hands the `bytes` bytes at `path` to `sink` in order, each byte once, and checks them
  // against `sha256` (failed_precondition when they differ). `what` names the blob in errors
  // ("checkpoint 4"). An error from `sink` ends the download and is returned.
  Status Download(const std::string& path, int64_t bytes, const std::string& sha256,
                  const std::string& what, const std::function<Status(const char*, size_t)>& sink);

  // Call, tried again after an unavailable answer (no answer, 502-504) up to max_retries times:
  // for the small calls around a transfer (starting it, committing it).
  Result<Response> CallWithRetry(const Request& request);

  // Whether another try of a transfer's step may succeed where this one failed.
  static bool Retryable(const Status& status);

 private:
  void Backoff(int failures) const;

  Client& client_;
  const BlobOptions options_;
};

}  // namespace common::http
