#include "controlplane/service/dataset_upload_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/crypto.h"
#include "common/file_util.h"
#include "common/parse_int.h"

namespace controlplane::service {

namespace {

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

// A descriptor closed on every path out.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string DatasetUploadFiles::PathOf(int64_t id) const {
  return root_ + "/" + std::to_string(id) + ".hdf5";
}

Status DatasetUploadFiles::Write(int64_t id, int64_t offset, const std::string& data) const {
  EMBODY_RETURN_IF_ERROR(common::MakeDirs(root_));
  const std::string path = PathOf(id);
  // O_NOFOLLOW: a link planted in the directory is never written through.
  Fd f{::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600)};
  if (f.fd < 0) return common::Internal(Errno("cannot open " + path));
  if (::ftruncate(f.fd, offset) != 0) return common::Internal(Errno("truncate of " + path));
  size_t done = 0;
  while (done < data.size()) {
    ssize_t w = ::pwrite(f.fd, data.data() + done, data.size() - done,
                         offset + static_cast<int64_t>(done));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return common::Internal(Errno("write to " + path));
    done += static_cast<size_t>(w);
  }
  if (::fdatasync(f.fd) != 0) return common::Internal(Errno("fdatasync of " + path));
  return Status::Ok();
}

Result<std::string> DatasetUploadFiles::Read(int64_t id, int64_t offset, size_t n) const {
  const std::string path = PathOf(id);
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW)};
  if (f.fd < 0) return common::Internal(Errno("cannot open " + path));
  std::string out(n, '\0');
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(f.fd, out.data() + done, n - done, offset + static_cast<int64_t>(done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return common::Internal(Errno("read of " + path));
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  out.resize(done);
  return out;
}

Result<DatasetUploadFiles::Digest> DatasetUploadFiles::DigestOf(int64_t id, int64_t bytes) const {
  const std::string path = PathOf(id);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ENOENT) return Digest{0, common::Sha256Hex("")};
    return common::Internal(Errno("cannot open " + path));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return common::Internal(Errno("stat of " + path));
  }
  BlobReader reader(fd, std::min<int64_t>(st.st_size, bytes));  // owns fd from here
  common::Sha256 h;
  constexpr size_t kBlock = 4 << 20;
  for (int64_t off = 0; off < reader.size(); off += kBlock) {
    EMBODY_ASSIGN_OR_RETURN(block, reader.Read(off, kBlock));
    h.Update(block.data(), block.size());
  }
  return Digest{reader.size(), h.FinalHex()};
}

Result<std::shared_ptr<BlobReader>> DatasetUploadFiles::Open(int64_t id, int64_t bytes) const {
  const std::string path = PathOf(id);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return common::NotFound("the upload of dataset " + std::to_string(id) + " is gone");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size < bytes) {
    ::close(fd);
    return common::NotFound("the upload of dataset " + std::to_string(id) + " is incomplete");
  }
  return std::make_shared<BlobReader>(fd, bytes);
}

void DatasetUploadFiles::Remove(int64_t id) const { ::unlink(PathOf(id).c_str()); }

std::vector<int64_t> DatasetUploadFiles::List() const {
  std::vector<int64_t> ids;
  DIR* dir = ::opendir(root_.c_str());
  if (!dir) return ids;
  while (struct dirent* e = ::readdir(dir)) {
    std::string name = e->d_name;
    const std::string suffix = ".hdf5";
    if (name.size() <= suffix.size() ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    auto id = common::ParseInt64(name.substr(0, name.size() - suffix.size()), 1);
    if (id.ok()) ids.push_back(*id);
  }
  ::closedir(dir);
  std::sort(ids.begin(), ids.end());
  return ids;
}

}  // namespace controlplane::service
