#include "storage/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace storage {

namespace {
std::string Errno() { return std::strerror(errno); }
}  // namespace

common::Result<std::unique_ptr<AtomicFile>> AtomicFile::Create(const std::string& path) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return common::Internal("create " + tmp + ": " + Errno());
  return std::unique_ptr<AtomicFile>(new AtomicFile(path, tmp, fd));
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

common::Status AtomicFile::Append(const void* data, size_t size) {
  if (fd_ < 0) return common::FailedPrecondition(path_ + ": append after commit");
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd_, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return common::Internal("write " + tmp_ + ": " + Errno());
    }
    p += n;
    size -= static_cast<size_t>(n);
    size_ += static_cast<uint64_t>(n);
  }
  return common::Status::Ok();
}

common::Status AtomicFile::Commit() {
  if (fd_ < 0) return common::FailedPrecondition(path_ + ": committed twice");
  int fd = fd_;
  fd_ = -1;
  if (::fsync(fd) != 0) {
    std::string err = Errno();
    ::close(fd);
    return common::Internal("fsync " + tmp_ + ": " + err);
  }
  if (::close(fd) != 0) return common::Internal("close " + tmp_ + ": " + Errno());
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    return common::Internal("rename " + tmp_ + " -> " + path_ + ": " + Errno());
  }
  committed_ = true;
  std::filesystem::path p(path_);
  return SyncDir(p.has_parent_path() ? p.parent_path().string() : ".");
}

common::Status SyncDir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return common::Internal("open directory " + dir + ": " + Errno());
  int rc = ::fsync(fd);
  std::string err = rc != 0 ? Errno() : "";
  ::close(fd);
  if (rc != 0) return common::Internal("fsync directory " + dir + ": " + err);
  return common::Status::Ok();
}

common::Result<std::unique_ptr<RandomAccessFile>> RandomAccessFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return common::NotFound(path + ": no such file");
    return common::Internal("open " + path + ": " + Errno());
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    std::string err = Errno();
    ::close(fd);
    return common::Internal("stat " + path + ": " + err);
  }
  return std::unique_ptr<RandomAccessFile>(
      new RandomAccessFile(path, fd, static_cast<uint64_t>(st.st_size)));
}

RandomAccessFile::~RandomAccessFile() {
  if (fd_ >= 0) ::close(fd_);
}

common::Status RandomAccessFile::Read(uint64_t offset, size_t size, void* out) const {
  char* p = static_cast<char*>(out);
  while (size > 0) {
    ssize_t n = ::pread(fd_, p, size, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return common::Internal("read " + path_ + " at " + std::to_string(offset) + ": " + Errno());
    }
    if (n == 0) {
      return common::FailedPrecondition(path_ + ": unexpected end of file at " +
                                        std::to_string(offset) + " (truncated?)");
    }
    p += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return common::Status::Ok();
}

}  // namespace storage
