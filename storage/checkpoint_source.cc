#include "storage/checkpoint_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/env.h"

namespace storage {

using common::Result;

namespace {

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

}  // namespace

Result<std::unique_ptr<CheckpointSource>> CheckpointSource::OpenInDir(const std::string& dir,
                                                                      const std::string& name,
                                                                      int64_t max_bytes) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos || name.size() > 255) {
    return common::InvalidArgument("checkpoint file name must be a plain name: " + name);
  }
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) return common::NotFound(Errno("cannot open directory " + dir));
  int fd = ::openat(dfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  int open_errno = errno;
  ::close(dfd);
  if (fd < 0) {
    errno = open_errno;
    if (open_errno == ELOOP) {
      return common::InvalidArgument("checkpoint " + dir + "/" + name + " is a symbolic link");
    }
    return common::NotFound(Errno("cannot open " + dir + "/" + name));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return common::Internal(Errno("cannot stat " + name));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return common::InvalidArgument("checkpoint " + dir + "/" + name + " is not a regular file");
  }
  if (st.st_size > max_bytes) {
    ::close(fd);
    return common::Status(common::Code::kResourceExhausted,
                          "checkpoint " + name + " has " + std::to_string(st.st_size) +
                              " bytes, over the limit of " + std::to_string(max_bytes));
  }
  // Back to blocking reads for a regular file (O_NONBLOCK only guarded the open).
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return std::unique_ptr<CheckpointSource>(new CheckpointSource(fd, st.st_size));
}

Result<std::unique_ptr<CheckpointSource>> CheckpointSource::Open(const std::string& path,
                                                                 int64_t max_bytes) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return OpenInDir(".", path, max_bytes);
  return OpenInDir(slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1), max_bytes);
}

CheckpointSource::~CheckpointSource() { ::close(fd_); }

Result<std::string> CheckpointSource::ReadAt(int64_t offset, size_t n) const {
  if (offset < 0) return common::InvalidArgument("negative offset");
  if (offset >= size_) return std::string();
  n = static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(n), size_ - offset));
  EMBODY_ASSIGN_OR_RETURN(out, common::ReadAt(fd_, offset, n));
  if (out.size() != n) return common::FailedPrecondition("checkpoint file shrank while being read");
  return out;
}

Result<std::string> CheckpointSource::Sha256Hex() {
  if (!sha256_.empty()) return sha256_;
  Sha256 h;
  constexpr size_t kBlock = 1 << 20;
  for (int64_t off = 0; off < size_; off += kBlock) {
    EMBODY_ASSIGN_OR_RETURN(block, ReadAt(off, kBlock));
    h.Update(block.data(), block.size());
  }
  sha256_ = h.FinalHex();
  return sha256_;
}

}  // namespace storage
