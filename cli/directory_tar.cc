#include "cli/directory_tar.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

namespace cli {

namespace {

constexpr int64_t kBlock = 512;
constexpr int64_t kMaxOctalSize = (int64_t{1} << 33) - 1;  // 11 octal digits
constexpr int64_t kMaxOctalTime = (int64_t{1} << 33) - 1;

int64_t Padding(int64_t n) { return (kBlock - n % kBlock) % kBlock; }

common::Status Errno(const std::string& what, const std::string& path) {
  return common::InvalidArgument(what + " " + path + ": " + std::strerror(errno), "DIR");
}

// `len - 1` octal digits and a NUL; v must fit.
void PutOctal(char* field, size_t len, uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%0*llo", static_cast<int>(len - 1),
                static_cast<unsigned long long>(v));
  std::memcpy(field, buf, len - 1);
  field[len - 1] = '\0';
}

// GNU's base-256 form: the high bit of the first byte set, then the value big-endian.
void PutBase256(char* field, size_t len, uint64_t v) {
  std::memset(field, 0, len);
  field[0] = static_cast<char>(0x80);
  for (size_t i = len - 1; i > 0 && v > 0; --i, v >>= 8) field[i] = static_cast<char>(v & 0xff);
}

std::string UstarHeader(const std::string& name, const std::string& prefix, char type, int64_t size,
                        int64_t mtime, unsigned mode) {
  std::string h(kBlock, '\0');
  char* b = h.data();
  std::memcpy(b, name.data(), std::min<size_t>(name.size(), 100));
  PutOctal(b + 100, 8, mode);
  PutOctal(b + 108, 8, 0);  // uid
  PutOctal(b + 116, 8, 0);  // gid
  if (size <= kMaxOctalSize) {
    PutOctal(b + 124, 12, static_cast<uint64_t>(size));
  } else {
    PutBase256(b + 124, 12, static_cast<uint64_t>(size));
  }
  PutOctal(b + 136, 12, static_cast<uint64_t>(std::clamp<int64_t>(mtime, 0, kMaxOctalTime)));
  b[156] = type;
  std::memcpy(b + 257,
              "ustar\0"
              "00",
              8);
  PutOctal(b + 329, 8, 0);  // devmajor
  PutOctal(b + 337, 8, 0);  // devminor
  std::memcpy(b + 345, prefix.data(), std::min<size_t>(prefix.size(), 155));
  std::memset(b + 148, ' ', 8);
  unsigned sum = 0;
  for (char c : h) sum += static_cast<unsigned char>(c);
  char chk[8];
  std::snprintf(chk, sizeof chk, "%06o", sum);
  std::memcpy(b + 148, chk, 6);
  b[154] = '\0';
  b[155] = ' ';
  return h;
}

// ustar's name and prefix fields for `name`, when it fits them.
bool SplitName(const std::string& name, std::string* prefix, std::string* rest) {
  if (name.size() <= 100) {
    prefix->clear();
    *rest = name;
    return true;
  }
  // The slash may not be the trailing one of a directory's name.
  for (size_t i = name.find('/'); i != std::string::npos && i + 1 < name.size();
       i = name.find('/', i + 1)) {
    if (i <= 155 && name.size() - i - 1 <= 100) {
      *prefix = name.substr(0, i);
      *rest = name.substr(i + 1);
      return true;
    }
  }
  return false;
}

size_t Digits(size_t v) { return std::to_string(v).size(); }

// "LEN key=value\n", LEN counting the whole record, itself included.
std::string PaxRecord(const std::string& key, const std::string& value) {
  const size_t body = key.size() + value.size() + 3;
  size_t len = body + Digits(body);
  if (Digits(len) != Digits(body)) len = body + Digits(len);
  return std::to_string(len) + " " + key + "=" + value + "\n";
}

struct DirId {
  dev_t dev;
  ino_t ino;
  bool operator==(const DirId&) const = default;
};

common::Status Walk(const std::string& abs, const std::string& rel, std::vector<DirId>& path,
                    std::vector<DirectoryTar::Member>& out) {
  DIR* d = ::opendir(abs.c_str());
  if (!d) return Errno("cannot read", abs);
  std::vector<std::string> names;
  errno = 0;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    const std::string full = abs + "/" + name;
    struct stat st {};
    // stat, not lstat: a link is read as what it names.
    if (::stat(full.c_str(), &st) != 0) return Errno("cannot read", full);
    DirectoryTar::Member m;
    m.mtime = st.st_mtime;
    if (S_ISDIR(st.st_mode)) {
      const DirId id{st.st_dev, st.st_ino};
      if (std::find(path.begin(), path.end(), id) != path.end()) {
        return common::InvalidArgument(full + " is a symbolic link back into its own parents",
                                       "DIR");
      }
      m.name = rel + name + "/";
      out.push_back(m);
      path.push_back(id);
      EMBODY_RETURN_IF_ERROR(Walk(full, m.name, path, out));
      path.pop_back();
    } else if (S_ISREG(st.st_mode)) {
      m.name = rel + name;
      m.source = full;
      m.size = st.st_size;
      out.push_back(m);
    } else {
      return common::InvalidArgument(
          full +
              " is neither a regular file nor a directory (a FIFO, socket or device); "
              "a dataset upload carries files and directories only",
          "DIR");
    }
  }
  return common::Status::Ok();
}

}  // namespace

std::string DirectoryTar::Headers(const Member& m) const {
  std::string prefix, rest, records;
  const bool fits = SplitName(m.name, &prefix, &rest);
  if (!fits) records += PaxRecord("path", m.name);
  if (m.size > kMaxOctalSize) records += PaxRecord("size", std::to_string(m.size));
  const bool dir = m.source.empty();
  std::string out;
  if (!records.empty()) {
    std::string base = m.name;
    if (base.back() == '/') base.pop_back();
    base = base.substr(base.rfind('/') + 1).substr(0, 80);
    out += UstarHeader("PaxHeaders/" + base, "", 'x', static_cast<int64_t>(records.size()), m.mtime,
                       0644);
    out += records;
    out.append(static_cast<size_t>(Padding(static_cast<int64_t>(records.size()))), '\0');
  }
  if (!fits) rest = m.name.substr(0, 100);  // readers that know pax take the path from it
  out += UstarHeader(rest, prefix, dir ? '5' : '0', m.size, m.mtime, dir ? 0755 : 0644);
  return out;
}

common::Result<std::unique_ptr<DirectoryTar>> DirectoryTar::Open(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return Errno("cannot read", dir);
  if (!S_ISDIR(st.st_mode)) return common::InvalidArgument(dir + " is not a directory", "DIR");
  std::unique_ptr<DirectoryTar> tar(new DirectoryTar(dir));
  std::vector<DirId> path{{st.st_dev, st.st_ino}};
  EMBODY_RETURN_IF_ERROR(Walk(dir, "", path, tar->members_));
  int64_t offset = 0;
  for (Member& m : tar->members_) {
    m.offset = offset;
    m.header_bytes = static_cast<int64_t>(tar->Headers(m).size());
    offset += m.header_bytes + m.size + Padding(m.size);
    if (!m.source.empty()) ++tar->files_;
  }
  if (tar->files_ == 0) return common::InvalidArgument(dir + " holds no files", "DIR");
  tar->size_ = offset + 2 * kBlock;  // the end-of-archive marker: two zero blocks
  return tar;
}

common::Result<std::string> DirectoryTar::Read(int64_t offset, size_t n) const {
  std::string out;
  if (offset < 0 || offset >= size_) return out;
  out.reserve(std::min<int64_t>(static_cast<int64_t>(n), size_ - offset));
  auto it = std::upper_bound(members_.begin(), members_.end(), offset,
                             [](int64_t off, const Member& m) { return off < m.offset; });
  size_t i = static_cast<size_t>(it - members_.begin()) - (it == members_.begin() ? 0 : 1);
  while (out.size() < n && offset < size_) {
    const int64_t want = static_cast<int64_t>(n - out.size());
    if (i >= members_.size()) {
      const int64_t take = std::min(want, size_ - offset);
      out.append(static_cast<size_t>(take), '\0');
      offset += take;
      continue;
    }
    const Member& m = members_[i];
    const int64_t end = m.offset + m.header_bytes + m.size + Padding(m.size);
    if (offset >= end) {
      ++i;
      continue;
    }
    const int64_t rel = offset - m.offset;
    int64_t take = 0;
    if (rel < m.header_bytes) {
      take = std::min(want, m.header_bytes - rel);
      out += Headers(m).substr(static_cast<size_t>(rel), static_cast<size_t>(take));
    } else if (rel < m.header_bytes + m.size) {
      const int64_t from = rel - m.header_bytes;
      take = std::min(want, m.size - from);
      const int fd = ::open(m.source.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) return Errno("cannot read", m.source);
      struct stat st {};
      if (::fstat(fd, &st) != 0 || st.st_size != m.size) {
        ::close(fd);
        return common::FailedPrecondition(m.source + " changed while it was being uploaded (" +
                                          std::to_string(m.size) + " bytes before, " +
                                          std::to_string(st.st_size) + " now)");
      }
      const size_t at = out.size();
      out.resize(at + static_cast<size_t>(take));
      int64_t done = 0;
      while (done < take) {
        const ssize_t r =
            ::pread(fd, out.data() + at + done, static_cast<size_t>(take - done), from + done);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
          const std::string why = r < 0 ? std::strerror(errno) : "it ended early";
          ::close(fd);
          return common::FailedPrecondition("cannot read " + m.source + ": " + why);
        }
        done += r;
      }
      ::close(fd);
    } else {
      take = std::min(want, end - offset);
      out.append(static_cast<size_t>(take), '\0');
    }
    offset += take;
  }
  return out;
}

}  // namespace cli
