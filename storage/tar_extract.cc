// ExtractTar: a tar file unpacked with TarReader into a new directory, every member created
// through directory descriptors opened without following links, so that no member can write
// outside the destination.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "storage/tar_reader.h"
#include "storage/tar_reader_internal.h"

namespace storage {

namespace {

using tar_internal::Shown;

// Directory descriptors opened under the destination, walked one component at a time without
// following links (only this code creates anything there, and only directories and files).
class Unpacker {
 public:
  Unpacker(std::string archive, int root) : archive_(std::move(archive)), root_(root) {}
  ~Unpacker() { CloseCached(); }

  common::Status Refuse(const TarEntry& e, const std::string& why) const {
    return common::InvalidArgument(archive_ + ": member #" + std::to_string(e.number) + " '" +
                                   Shown(e.path) + "': " + why);
  }

  // The descriptor of directory `rel` ("" : the root), made as needed; owned by the Unpacker.
  common::Result<int> Directory(const TarEntry& e, const std::string& rel) {
    if (rel.empty()) return root_;
    if (cached_fd_ >= 0 && rel == cached_path_) return cached_fd_;
    CloseCached();
    int cur = root_;
    size_t begin = 0;
    while (begin < rel.size()) {
      size_t end = rel.find('/', begin);
      if (end == std::string::npos) end = rel.size();
      const std::string part = rel.substr(begin, end - begin);
      if (::mkdirat(cur, part.c_str(), 0700) != 0 && errno != EEXIST) {
        const int err = errno;
        if (cur != root_) ::close(cur);
        return Refuse(e,
                      "cannot create directory " + rel.substr(0, end) + ": " + std::strerror(err));
      }
      const int next = ::openat(cur, part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      const int err = errno;
      if (cur != root_) ::close(cur);
      if (next < 0) {
        return Refuse(
            e, err == ENOTDIR || err == ELOOP
                   ? "'" + Shown(rel.substr(0, end)) +
                         "' is a file of an earlier member, not a directory"
                   : "cannot open directory " + rel.substr(0, end) + ": " + std::strerror(err));
      }
      cur = next;
      begin = end + 1;
    }
    cached_fd_ = cur;
    cached_path_ = rel;
    return cur;
  }

 private:
  void CloseCached() {
    if (cached_fd_ >= 0) ::close(cached_fd_);
    cached_fd_ = -1;
    cached_path_.clear();
  }

  std::string archive_;
  int root_;
  int cached_fd_ = -1;
  std::string cached_path_;
};

common::Status WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return common::Internal(std::strerror(errno));
    data += w;
    n -= static_cast<size_t>(w);
  }
  return common::Status::Ok();
}

common::Status Unpack(const std::string& archive, int in, int root, const TarLimits& limits,
                      TarExtractStats* stats) {
  TarReader reader(
      archive,
      [in](char* buf, size_t n) -> common::Result<size_t> {
        for (;;) {
          const ssize_t r = ::read(in, buf, n);
          if (r >= 0) return static_cast<size_t>(r);
          if (errno != EINTR) return common::Internal(std::strerror(errno));
        }
      },
      limits);
  Unpacker dirs(archive, root);
  std::vector<char> buf(1 << 20);
  for (;;) {
    EMBODY_ASSIGN_OR_RETURN(entry, reader.Next());
    if (!entry) return common::Status::Ok();
    const TarEntry& e = *entry;
    if (e.type == TarEntry::Type::kDirectory) {
      EMBODY_ASSIGN_OR_RETURN(fd, dirs.Directory(e, e.path));
      (void)fd;
      ++stats->directories;
      continue;
    }
    const size_t slash = e.path.rfind('/');
    const std::string parent = slash == std::string::npos ? "" : e.path.substr(0, slash);
    const std::string base = slash == std::string::npos ? e.path : e.path.substr(slash + 1);
    EMBODY_ASSIGN_OR_RETURN(dir, dirs.Directory(e, parent));
    const int out =
        ::openat(dir, base.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (out < 0) {
      return dirs.Refuse(e, errno == EEXIST
                                ? "the name is taken by an earlier member"
                                : std::string("cannot create: ") + std::strerror(errno));
    }
    common::Status st;
    for (;;) {
      auto n = reader.ReadData(buf.data(), buf.size());
      if (!n.ok()) {
        st = n.status();
        break;
      }
      if (*n == 0) break;
      if (common::Status w = WriteAll(out, buf.data(), *n); !w.ok()) {
        st = dirs.Refuse(e, "cannot write: " + w.message());
        break;
      }
    }
    if (::close(out) != 0 && st.ok()) {
      st = dirs.Refuse(e, std::string("cannot write: ") + std::strerror(errno));
    }
    EMBODY_RETURN_IF_ERROR(st);
    ++stats->files;
    stats->bytes += e.size;
  }
}

}  // namespace

common::Result<TarExtractStats> ExtractTar(const std::string& archive, const std::string& dest,
                                           const TarLimits& limits) {
  const int in = ::open(archive.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0)
    return common::InvalidArgument("cannot open " + archive + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(in, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(in);
    return common::InvalidArgument(archive + ": not a file");
  }
  if (::mkdir(dest.c_str(), 0700) != 0) {
    const int err = errno;
    ::close(in);
    return common::InvalidArgument("cannot create " + dest + ": " + std::strerror(err));
  }
  const int root = ::open(dest.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  TarExtractStats stats;
  common::Status result =
      root < 0 ? common::Internal("cannot open " + dest + ": " + std::strerror(errno))
               : Unpack(archive, in, root, limits, &stats);
  if (root >= 0) ::close(root);
  ::close(in);
  if (!result.ok()) {
    std::error_code ec;
    std::filesystem::remove_all(dest, ec);
    return result;
  }
  return stats;
}

}  // namespace storage
