#include "cli/dataset_upload.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <ostream>

#include "cli/directory_tar.h"
#include "cli/format.h"
#include "cli/tenancy_format.h"
#include "common/crypto.h"
#include "common/env.h"
#include "common/http/blob_client.h"

namespace cli {

using common::Result;
using common::Status;
using nlohmann::json;

namespace {

constexpr int kMaxFailuresInARow = 5;

// The local file, read by offset.
class LocalFile {
 public:
  ~LocalFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  Status Open(const std::string& path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st {};
    if (fd_ < 0 || ::fstat(fd_, &st) != 0) {
      return common::InvalidArgument("cannot read " + path + ": " + std::strerror(errno), "FILE");
    }
    if (!S_ISREG(st.st_mode)) return common::InvalidArgument(path + " is not a file", "FILE");
    size_ = st.st_size;
    return Status::Ok();
  }
  int64_t size() const { return size_; }
  Result<std::string> Read(int64_t offset, size_t n) const { return common::ReadAt(fd_, offset, n); }

 private:
  int fd_ = -1;
  int64_t size_ = 0;
};

// What is uploaded: a local file as it is, or a directory as a tar stream (directory_tar.h).
struct UploadBody {
  int64_t size = 0;
  std::function<Result<std::string>(int64_t offset, size_t n)> read;
};

Result<std::string> Sha256Of(const UploadBody& body) {
  common::Sha256 h;
  constexpr size_t kBlock = 4 << 20;
  for (int64_t off = 0; off < body.size; off += kBlock) {
    auto block = body.read(off, kBlock);
    if (!block.ok()) return block.status();
    h.Update(block->data(), block->size());
  }
  return h.FinalHex();
}

std::string Mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

void Progress(std::ostream& err, int64_t id, int64_t done, int64_t total) {
  const int pct = total > 0 ? static_cast<int>(done * 100 / total) : 100;
  err << "\rdataset " << id << ": " << Mib(done) << " / " << Mib(total) << " MiB (" << pct
      << "%)" << std::flush;
}

int Refused(std::ostream& err, const Status& s, int64_t id) {
  err << "\nembody: " << RefusalText(s) << "\n";
  if (id > 0) {
    err << "embody: the upload of dataset " << id << " is kept; continue it with --resume " << id
        << ", or delete it with `embody datasets rm " << id << "`\n";
  }
  return kExitRefused;
}

}  // namespace

int UploadDataset(const Invocation& inv, ApiClient& api, std::ostream& out, std::ostream& err) {
  // A LeRobot dataset is a directory: it goes as a tar stream, unpacked by the import job. A
  // tar made elsewhere (or an HDF5 file) goes as it is.
  const bool lerobot = inv.format == "lerobot";
  LocalFile file;
  std::unique_ptr<DirectoryTar> tar;
  struct stat st {};
  if (lerobot && ::stat(inv.path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    auto t = DirectoryTar::Open(inv.path);
    if (!t.ok()) return Refused(err, t.status(), 0);
    tar = std::move(*t);
    err << "packing " << inv.path << " as a tar stream (" << tar->files() << " files)\n";
  } else if (Status s = file.Open(inv.path); !s.ok()) {
    return Refused(err, s, 0);
  }
  UploadBody body;
  if (tar) {
    body = {tar->size(), [&tar](int64_t off, size_t n) { return tar->Read(off, n); }};
  } else {
    body = {file.size(), [&file](int64_t off, size_t n) { return file.Read(off, n); }};
  }
  if (body.size == 0) {
    return Refused(err, common::InvalidArgument(inv.path + " is empty", "FILE"), 0);
  }
  err << "hashing " << inv.path << " (" << Mib(body.size) << " MiB)\n";
  auto sha = Sha256Of(body);
  if (!sha.ok()) return Refused(err, sha.status(), 0);

  int64_t id = 0, offset = 0;
  if (inv.resume) {
    id = *inv.resume;
    auto d = api.Get("/v1/datasets/" + std::to_string(id));
    if (!d.ok()) return Refused(err, d.status(), 0);
    const json up = d->value("source", json::object()).value("upload", json::object());
    if (d->value("state", "") != "uploading") {
      return Refused(err,
                     common::FailedPrecondition("dataset " + std::to_string(id) + " is " +
                                                d->value("state", "") + ", not uploading"),
                     0);
    }
    if (up.value("sha256", "") != *sha || up.value("bytes", int64_t{-1}) != body.size) {
      return Refused(err,
                     common::FailedPrecondition(
                         "dataset " + std::to_string(id) +
                         " is the upload of another file (or the directory changed since)"),
                     0);
    }
    offset = d->value("received_bytes", int64_t{0});
    err << "resuming dataset " << id << " at " << Mib(offset) << " MiB\n";
  } else {
    json source = {{"format", inv.format.empty() ? "hdf5" : inv.format},
                   {"upload", {{"bytes", body.size}, {"sha256", *sha}}}};
    if (!inv.resize.empty()) source["resize"] = inv.resize;
    if (!inv.filter.empty()) source["filter"] = inv.filter;
    if (!inv.language.empty()) source["language"] = inv.language;
    if (!inv.nan.empty()) source["nan"] = inv.nan;
    auto d = api.Post("/v1/datasets", json{{"name", inv.name}, {"source", source}}.dump());
    if (!d.ok()) return Refused(err, d.status(), 0);
    id = d->value("id", int64_t{0});
    err << "dataset " << id << " (" << inv.name << " version " << Cell(*d, "version")
        << "): uploading; if interrupted, continue with --resume " << id << "\n";
  }

  const std::string chunk_path = "/v1/datasets/" + std::to_string(id) + "/upload";
  auto http = api.Http();
  if (!http.ok()) return Refused(err, http.status(), id);
  common::http::BlobOptions blob_options;
  blob_options.chunk_bytes = static_cast<size_t>(inv.chunk_mib) << 20;
  blob_options.max_retries = kMaxFailuresInARow;
  common::http::BlobClient blob(**http, blob_options);
  Progress(err, id, offset, body.size);
  Status sent = blob.Upload(
      chunk_path, body.size, offset, body.read,
      [&]() -> Result<int64_t> {
        auto d = api.Get("/v1/datasets/" + std::to_string(id));
        if (!d.ok()) return d.status();
        return d->value("received_bytes", int64_t{-1});
      },
      [&](int64_t done) { Progress(err, id, done, body.size); });
  if (!sent.ok()) return Refused(err, sent, id);
  err << "\n";
  auto c = api.Post(chunk_path + "/commit", "{}");
  if (!c.ok()) return Refused(err, c.status(), id);
  if (inv.json) {
    out << c->dump() << "\n";
  } else {
    out << "dataset " << Cell(*c, "id") << " (" << Cell(*c, "name") << " version "
        << Cell(*c, "version") << ") uploaded, importing as job " << Cell(*c, "job_id")
        << "; follow it with `embody datasets show " << Cell(*c, "id") << "`\n";
  }
  return 0;
}

}  // namespace cli
