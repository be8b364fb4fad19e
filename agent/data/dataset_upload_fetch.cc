#include "agent/data/dataset_upload_fetch.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/http/blob_client.h"

namespace agent {

using nlohmann::json;

namespace {

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
    if (w < 0) return common::ErrnoInternal("write of the dataset upload");
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
  // An upload, or a pull from a registry: either way the job now reads a local file.
  for (const char* key : {"upload", "registry", "reference", "registry_url"}) src.erase(key);
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
  common::http::ClientOptions client_options;
  client_options.base_url = o.server_url;
  client_options.ca_file = o.ca_file;
  client_options.connect_timeout_s = 10;
  client_options.read_timeout_s = static_cast<double>(o.timeout.count());
  client_options.bearer_token_source = o.token;
  EMBODY_ASSIGN_OR_RETURN(client, common::http::Client::Create(client_options));
  common::http::BlobOptions blob_options;
  blob_options.max_retries = o.max_retries;
  blob_options.first_backoff = o.first_backoff;
  common::http::BlobClient blob(*client, blob_options);

  int fd = ::open(local_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return common::ErrnoInternal("cannot create " + local_path);
  const std::string id = std::to_string(ref.dataset_id);
  common::Status st =
      blob.Download("/v1/datasets/" + id + "/upload", ref.bytes, ref.sha256,
                    "the upload of dataset " + id,
                    [fd](const char* data, size_t n) { return WriteAll(fd, data, n); });
  if (st.ok() && ::fsync(fd) != 0) st = common::ErrnoInternal("fsync of " + local_path);
  ::close(fd);
  if (!st.ok()) ::unlink(local_path.c_str());
  return st;
}

common::Status HandUploadToJob(const std::string& fetched, const std::string& job_path,
                               const std::optional<JobCredentials>& owner) {
  if (::rename(fetched.c_str(), job_path.c_str()) != 0) {
    return common::ErrnoInternal("cannot move the dataset upload to " + job_path);
  }
  if (owner && ::lchown(job_path.c_str(), owner->uid, owner->gid) != 0) {
    return common::ErrnoInternal("cannot give " + job_path + " to the job");
  }
  if (::chmod(job_path.c_str(), 0400) != 0) return common::ErrnoInternal("chmod of " + job_path);
  return common::Status::Ok();
}

}  // namespace agent
