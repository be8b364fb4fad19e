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

common::Result<std::unique_ptr<common::AtomicWritableFile>> CreateAtomicFile(
    const std::string& path) {
  common::AtomicFileOptions options;
  options.temp = common::TempName::kBeside;
  return common::Env::Default()->NewAtomicFile(path, options);
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
