#include "common/http/blob_client.h"

#include <algorithm>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/crypto.h"
#include "common/http/status_http.h"

namespace common::http {

bool BlobClient::Retryable(const Status& s) {
  // Internal: a 500 (a proxy's, or the server's disk); failed_precondition: an offset the server
  // does not hold (a reply lost after the chunk was stored); the chunk checksum: damaged on the
  // way.
  return s.code() == Code::kUnavailable || s.code() == Code::kInternal ||
         s.code() == Code::kFailedPrecondition ||
         (s.code() == Code::kInvalidArgument && s.field() == "X-Content-Sha256");
}

void BlobClient::Backoff(int failures) const {
  std::this_thread::sleep_for(options_.first_backoff * (1 << std::min(failures - 1, 6)));
}

Result<Response> BlobClient::CallWithRetry(const Request& request) {
  for (int failures = 0;;) {
    auto r = client_.Call(request);
    if (r.ok() || r.status().code() != Code::kUnavailable || ++failures > options_.max_retries) {
      return r;
    }
    Backoff(failures);
  }
}

Status BlobClient::Upload(const std::string& data_path, int64_t size, int64_t offset,
                          const BlobRead& read, const std::function<Result<int64_t>()>& received,
                          const std::function<void(int64_t)>& progress) {
  int failures = 0;
  while (offset < size) {
    EMBODY_ASSIGN_OR_RETURN(chunk, read(offset, options_.chunk_bytes));
    Request put;
    put.method = "PUT";
    put.path = data_path + "?offset=" + std::to_string(offset);
    put.content_type = "application/octet-stream";
    put.headers = {{"X-Content-Sha256", Sha256Hex(chunk)}};
    put.body = std::move(chunk);
    auto r = client_.Call(put);
    if (r.ok()) {
      const auto j = nlohmann::json::parse(r->body, nullptr, false);
      const int64_t next = offset + static_cast<int64_t>(put.body.size());
      offset = j.is_object() ? j.value("received_bytes", next) : next;
      failures = 0;
      if (progress) progress(offset);
      continue;
    }
    if (!Retryable(r.status()) || ++failures > options_.max_retries) return r.status();
    Backoff(failures);
    // Go on from what the server holds, whatever happened to the last answer; when it cannot
    // say for now, send the same chunk again.
    auto held = received();
    if (!held.ok()) {
      if (held.status().code() != Code::kUnavailable) return held.status();
      continue;
    }
    if (*held < 0 || *held > size) {
      return Internal("the server holds " + std::to_string(*held) + " bytes of a " +
                      std::to_string(size) + "-byte blob");
    }
    offset = *held;
  }
  return Status::Ok();
}

Status BlobClient::Download(const std::string& path, int64_t bytes, const std::string& sha256,
                            const std::string& what,
                            const std::function<Status(const char*, size_t)>& sink) {
  Sha256 h;
  int64_t taken = 0;
  int failures = 0;
  while (taken < bytes) {
    const int64_t from = taken;
    Request get;
    get.path = path;
    get.headers = {{"Range", "bytes=" + std::to_string(from) + "-"}};
    auto r = client_.Receive(get, [&](const char* data, size_t n) {
      if (taken + static_cast<int64_t>(n) > bytes) {
        return Internal("the server sent more bytes than " + what + " holds");
      }
      h.Update(data, n);
      EMBODY_RETURN_IF_ERROR(sink(data, n));
      taken += static_cast<int64_t>(n);
      return Status::Ok();
    });
    if (r.ok() && r->status == 200 && from > 0) {
      // The server ignored the Range (Receive handed nothing on): it cannot resume.
      return Internal("the server ignored the Range of a download of " + what);
    }
    Status st;
    if (!r.ok()) {
      st = r.status();  // no answer, or one cut short: resumed; the sink's error: final
      if (st.code() != Code::kUnavailable) return st;
    } else if (!r->ok()) {
      st = StatusFromResponse(r->status, r->body);
      if (r->status < 500) return st;  // refused (not this node's, gone): final
    } else if (taken > from) {
      failures = 0;
      continue;
    } else {
      st = Unavailable("an answer without bytes");
    }
    if (++failures > options_.max_retries) {
      return Unavailable("download of " + what + " failed: " + st.message());
    }
    Backoff(failures);
  }
  if (h.FinalHex() != sha256) return FailedPrecondition(what + " fails its SHA-256 check");
  return Status::Ok();
}

}  // namespace common::http
