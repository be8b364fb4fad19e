#include "controlplane/service/blob_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "common/crypto.h"
#include "common/env.h"

namespace controlplane::service {

namespace {

Status Errno(const std::string& what) {
  return common::Internal(what + ": " + std::strerror(errno));
}

// A descriptor closed on every path out.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  int Release() { return std::exchange(fd, -1); }
};

}  // namespace

BlobReader::~BlobReader() { ::close(fd_); }

Result<std::string> BlobReader::Read(int64_t offset, size_t n) const {
  if (offset < 0 || offset >= size_) return std::string();
  n = static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(n), size_ - offset));
  EMBODY_ASSIGN_OR_RETURN(out, common::ReadAt(fd_, offset, n));
  if (out.size() != n) return common::Internal("a blob shrank while being read");
  return out;
}

Status BlobFiles::WriteAt(const std::string& name, int64_t offset, const std::string& data) const {
  const std::string path = PathOf(name);
  EMBODY_RETURN_IF_ERROR(common::Env::Default()->MakeDirs(common::DirName(path)));
  Fd f{::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600)};
  if (f.fd < 0) return Errno("cannot open " + path);
  if (::ftruncate(f.fd, offset) != 0) return Errno("truncate of " + path);
  size_t done = 0;
  while (done < data.size()) {
    ssize_t w =
        ::pwrite(f.fd, data.data() + done, data.size() - done, offset + static_cast<int64_t>(done));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return Errno("write to " + path);
    done += static_cast<size_t>(w);
  }
  if (::fdatasync(f.fd) != 0) return Errno("fdatasync of " + path);
  return Status::Ok();
}

Result<BlobFiles::Digest> BlobFiles::DigestOf(const std::string& name, int64_t limit) const {
  auto reader = Open(name, limit);
  if (!reader.ok()) {
    if (reader.status().code() == common::Code::kNotFound) return Digest{0, common::Sha256Hex("")};
    return reader.status();
  }
  common::Sha256 h;
  constexpr size_t kBlock = 4 << 20;
  for (int64_t off = 0; off < (*reader)->size(); off += kBlock) {
    EMBODY_ASSIGN_OR_RETURN(block, (*reader)->Read(off, kBlock));
    h.Update(block.data(), block.size());
  }
  return Digest{(*reader)->size(), h.FinalHex()};
}

Status BlobFiles::Commit(const std::string& from, const std::string& to, int64_t bytes) const {
  common::Env* env = common::Env::Default();
  const std::string part = PathOf(from), path = PathOf(to);
  if (bytes == 0 && ::access(part.c_str(), F_OK) != 0 && errno == ENOENT) {
    EMBODY_RETURN_IF_ERROR(env->MakeDirs(common::DirName(path)));
    return env->WriteFileAtomic(path, "", 0600);
  }
  return env->Rename(part, path);  // and syncs the directory
}

Result<std::shared_ptr<BlobReader>> BlobFiles::Open(const std::string& name, int64_t limit) const {
  const std::string path = PathOf(name);
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW)};
  if (f.fd < 0) {
    if (errno == ENOENT) return common::NotFound("no blob " + name);
    return Errno("cannot open " + path);
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) return Errno("stat of " + path);
  const int64_t size = limit < 0 ? st.st_size : std::min<int64_t>(st.st_size, limit);
  return std::make_shared<BlobReader>(f.Release(), size);
}

void BlobFiles::Remove(const std::string& name) const {
  (void)common::Env::Default()->Remove(PathOf(name));
}

std::vector<std::string> BlobFiles::List(const std::string& dir, const std::string& suffix) const {
  std::vector<std::string> stems;
  auto names = common::Env::Default()->List(dir.empty() ? root_ : PathOf(dir));
  if (!names.ok()) return stems;
  for (const std::string& name : *names) {
    if (name.size() > suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      stems.push_back(name.substr(0, name.size() - suffix.size()));
    }
  }
  return stems;
}

}  // namespace controlplane::service
