#include "storage/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/crypto.h"

namespace storage {

namespace {
std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}
std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }
}  // namespace

common::Status SyncDir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return common::Internal(Errno("cannot open " + dir));
  int rc = ::fsync(fd);
  ::close(fd);
  return rc == 0 ? common::Status::Ok() : common::Internal(Errno("fsync of " + dir));
}

common::Result<std::unique_ptr<AtomicFileWriter>> AtomicFileWriter::Create(const std::string& path,
                                                                           int mode) {
  const std::string dir = DirOf(path);
  const std::string temp = dir + "/.tmp-" + common::RandomToken().substr(0, 16);
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return common::Internal(Errno("cannot create " + temp));
  return std::unique_ptr<AtomicFileWriter>(new AtomicFileWriter(path, temp, fd));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_.c_str());
}

common::Status AtomicFileWriter::Append(const char* data, size_t n) {
  if (fd_ < 0) return common::FailedPrecondition("write after commit");
  size_t done = 0;
  while (done < n) {
    ssize_t w = ::write(fd_, data + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return common::Internal(Errno("write to " + temp_));
    done += static_cast<size_t>(w);
  }
  written_ += static_cast<int64_t>(n);
  return common::Status::Ok();
}

common::Status AtomicFileWriter::Commit() {
  if (fd_ < 0) return common::FailedPrecondition("committed twice");
  if (::fsync(fd_) != 0) return common::Internal(Errno("fsync of " + temp_));
  int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) return common::Internal(Errno("close of " + temp_));
  if (::rename(temp_.c_str(), path_.c_str()) != 0) {
    return common::Internal(Errno("rename to " + path_));
  }
  committed_ = true;
  return SyncDir(DirOf(path_));
}

}  // namespace storage
