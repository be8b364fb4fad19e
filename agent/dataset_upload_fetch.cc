#include "agent/dataset_upload_fetch.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <httplib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "common/crypto.h"
#include "common/http/client.h"

namespace agent {

using nlohmann::json;

namespace {

common::Status Errno(const std::string& what) {
  return common::Internal(what + ": " + std::strerror(errno));
}

bool IsHex64(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// Appends to an open descriptor, whole.
common::Status WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return Errno("write of the dataset upload");
    data += w;
    n -= static_cast<size_t>(w);
  }
  return common::Status::Ok();
}

}  // namespace

std::optional<UploadRef> UploadOf(const json& spec) {
  if (!spec.is_object() || spec.value("kind", "") != "import") return std::nullopt;
  auto imp = spec.find("import");
  if (imp == spec.end() || !imp->is_object()) return std::nullopt;
  auto src = imp->find("source");
  if (src == imp->end() || !src->is_object()) return std::nullopt;
  auto up = src->find("upload");
  if (up == src->end() || !up->is_object()) return std::nullopt;
  auto id = imp->find("dataset_id");
  UploadRef r;
  if (id == imp->end() || !id->is_number_integer() || !up->contains("bytes") ||
      !(*up)["bytes"].is_number_integer() || !up->contains("sha256") ||
      !(*up)["sha256"].is_string()) {
    return std::nullopt;
  }
  r.dataset_id = id->get<int64_t>();
  r.bytes = (*up)["bytes"].get<int64_t>();
  r.sha256 = (*up)["sha256"].get<std::string>();
  return r;
}

json SpecReadingCopy(const json& spec, const std::string& local_path) {
  json out = spec;
  json& src = out["import"]["source"];
  src.erase("upload");
  src["path"] = local_path;
  return out;
}

std::string UploadFileName(const json& spec) {
  const json* src = spec.is_object() ? &spec : nullptr;
  for (const char* key : {"import", "source"}) {
    if (!src || !src->is_object() || !src->contains(key)) return "upload.hdf5";
    src = &(*src)[key];
  }
  const std::string format = src->is_object() ? src->value("format", "") : "";
  return format == "lerobot" || format == "oci" ? "upload.tar" : "upload.hdf5";
}

common::Status FetchUpload(const UploadFetchOptions& o, const UploadRef& ref,
                           const std::string& local_path) {
  // The spec came from the server, but what the agent writes is bounded all the same.
  if (ref.dataset_id <= 0 || ref.bytes < 1 || ref.bytes > (int64_t{1} << 50) ||
      !IsHex64(ref.sha256)) {
    return common::InvalidArgument("malformed upload in the import job's spec", "import.source");
  }
  int fd = ::open(local_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Errno("cannot create " + local_path);
  common::Sha256 h;
  int64_t written = 0;
  common::Status st;
  int failures = 0;
  const std::string path = "/v1/datasets/" + std::to_string(ref.dataset_id) + "/upload";
  while (st.ok() && written < ref.bytes) {
    httplib::Client cli(o.server_url);
    if (common::Status secure = common::http::VerifyServer(cli, o.server_url, o.ca_file);
        !secure.ok()) {
      st = secure;
      break;
    }
    cli.set_connection_timeout(10, 0);
    cli.set_read_timeout(o.timeout.count(), 0);
    httplib::Headers headers;
    if (o.token) headers.emplace("Authorization", "Bearer " + o.token());
    const int64_t from = written;
    headers.emplace("Range", "bytes=" + std::to_string(from) + "-");
    int status = 0;
    common::Status write_error;
    auto res = cli.Get(
        path, headers,
        [&](const httplib::Response& resp) {
          status = resp.status;
          // A server that ignored the Range would send the file from its start again.
          return status == 206 || (status == 200 && from == 0);
        },
        [&](const char* data, size_t n) {
          if (written + static_cast<int64_t>(n) > ref.bytes) {
            write_error = common::Internal("the server sent more bytes than the upload holds");
            return false;
          }
          h.Update(data, n);
          write_error = WriteAll(fd, data, n);
          if (write_error.ok()) written += static_cast<int64_t>(n);
          return write_error.ok();
        });
    if (!write_error.ok()) {
      st = write_error;
      break;
    }
    const bool whole = status == 206 || (status == 200 && from == 0);
    if (res && whole && written > from) {
      failures = 0;
      continue;
    }
    // Refusals are final (the node is not the import's, the upload is gone); anything else
    // (connection lost, 5xx) resumes from the bytes written.
    if (status == 401 || status == 403 || status == 404 || (status >= 400 && status < 500)) {
      st = common::Status(status == 404 ? common::Code::kNotFound
                                        : common::Code::kPermissionDenied,
                          "the server refused the upload of dataset " +
                              std::to_string(ref.dataset_id) + " (HTTP " +
                              std::to_string(status) + ")");
      break;
    }
    if (++failures > o.max_retries) {
      st = common::Unavailable("download of the upload of dataset " +
                               std::to_string(ref.dataset_id) + " failed: " +
                               (res ? "HTTP " + std::to_string(status)
                                    : httplib::to_string(res.error())));
      break;
    }
    std::this_thread::sleep_for(o.first_backoff * (1 << std::min(failures - 1, 6)));
  }
  if (st.ok() && ::fsync(fd) != 0) st = Errno("fsync of " + local_path);
  ::close(fd);
  if (st.ok() && h.FinalHex() != ref.sha256) {
    st = common::FailedPrecondition("the upload of dataset " + std::to_string(ref.dataset_id) +
                                    " fails its SHA-256 check");
  }
  if (!st.ok()) ::unlink(local_path.c_str());
  return st;
}

common::Status HandUploadToJob(const std::string& fetched, const std::string& job_path,
                               const std::optional<JobCredentials>& owner) {
  if (::rename(fetched.c_str(), job_path.c_str()) != 0) {
    return Errno("cannot move the dataset upload to " + job_path);
  }
  if (owner && ::lchown(job_path.c_str(), owner->uid, owner->gid) != 0) {
    return Errno("cannot give " + job_path + " to the job");
  }
  if (::chmod(job_path.c_str(), 0400) != 0) return Errno("chmod of " + job_path);
  return common::Status::Ok();
}

}  // namespace agent
