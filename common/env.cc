// Env::Default(): the POSIX file system. The temp+fsync+rename core every atomic write in the
// tree shares lives in PosixAtomicFile below.
#include "common/env.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/random_hex.h"

namespace common {

namespace {

Status Errno(const std::string& what) { return Internal(what + ": " + std::strerror(errno)); }

class PosixAtomicFile : public AtomicWritableFile {
 public:
  PosixAtomicFile(std::string path, std::string temp, int fd)
      : path_(std::move(path)), temp_(std::move(temp)), fd_(fd) {}
  ~PosixAtomicFile() override {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(temp_.c_str());
  }

  Status Append(const void* data, size_t n) override {
    if (fd_ < 0) return FailedPrecondition(path_ + ": append after commit");
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      ssize_t w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return Errno("write to " + temp_);
      p += w;
      n -= static_cast<size_t>(w);
      size_ += static_cast<uint64_t>(w);
    }
    return Status::Ok();
  }
  uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }

  Status Commit() override {
    if (fd_ < 0) return FailedPrecondition(path_ + ": committed twice");
    const int fd = fd_;
    fd_ = -1;
    if (::fsync(fd) != 0) {
      Status st = Errno("fsync of " + temp_);
      ::close(fd);
      return st;
    }
    if (::close(fd) != 0) return Errno("close of " + temp_);
    if (::rename(temp_.c_str(), path_.c_str()) != 0) return Errno("rename to " + path_);
    committed_ = true;
    return Env::Default()->SyncDir(DirName(path_));
  }

 private:
  const std::string path_;
  const std::string temp_;
  int fd_;
  uint64_t size_ = 0;
  bool committed_ = false;
};

class PosixEnv : public Env {
 public:
  Result<std::unique_ptr<AtomicWritableFile>> NewAtomicFile(
      const std::string& path, const AtomicFileOptions& options) override {
    const bool hidden = options.temp == TempName::kHidden;
    const std::string temp = hidden ? DirName(path) + "/.tmp-" + RandomHex(8) : path + ".tmp";
    const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | (hidden ? O_EXCL : O_TRUNC);
    const int fd = ::open(temp.c_str(), flags, static_cast<mode_t>(options.mode));
    if (fd < 0) return Errno("cannot create " + temp);
    // The umask, or a stale kBeside temp file, would leave another mode.
    if (::fchmod(fd, static_cast<mode_t>(options.mode)) != 0) {
      Status st = Errno("chmod of " + temp);
      ::close(fd);
      ::unlink(temp.c_str());
      return st;
    }
    return std::unique_ptr<AtomicWritableFile>(new PosixAtomicFile(path, temp, fd));
  }

  Result<std::string> ReadFile(const std::string& path) override {
    std::ifstream in(path, std::ios::binary);
    if (!in) return NotFound("cannot open " + path);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  Status Rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return Errno("rename " + from + " -> " + to);
    return SyncDir(DirName(to));
  }

  Status Remove(const std::string& path) override {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return Errno("remove " + path);
    return Status::Ok();
  }

  Result<std::vector<std::string>> List(const std::string& dir) override {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) {
      if (errno == ENOENT) return NotFound("no directory " + dir);
      return Errno("cannot list " + dir);
    }
    std::vector<std::string> names;
    while (struct dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(std::move(name));
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    return names;
  }

  Status MakeDirs(const std::string& path) override {
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    if (ec) return Internal("mkdir " + path + ": " + ec.message());
    return Status::Ok();
  }

  Status SyncDir(const std::string& dir) override {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return Errno("cannot open directory " + dir);
    const int rc = ::fsync(fd);
    Status st = rc == 0 ? Status::Ok() : Errno("fsync of directory " + dir);
    ::close(fd);
    return st;
  }
};

}  // namespace

Result<std::string> ReadAt(int fd, int64_t offset, size_t n) {
  std::string out(n, '\0');
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd, out.data() + done, n - done, offset + static_cast<int64_t>(done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Errno("read");
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  out.resize(done);
  return out;
}

std::string DirName(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

Env* Env::Default() {
  static PosixEnv* env = new PosixEnv();  // never destroyed: usable from static destructors
  return env;
}

Status Env::WriteFileAtomic(const std::string& path, const std::string& contents, int mode) {
  AtomicFileOptions options;
  options.mode = mode;
  EMBODY_ASSIGN_OR_RETURN(file, NewAtomicFile(path, options));
  EMBODY_RETURN_IF_ERROR(file->Append(contents));
  return file->Commit();
}

}  // namespace common
