#include "storage/tar_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

namespace storage {

namespace {

constexpr size_t kBlock = 512;
constexpr int64_t kMaxNumber = int64_t{1} << 62;  // far past any limit; keeps sums in range
constexpr size_t kMaxComponentBytes = 255;        // NAME_MAX

int64_t PaddingOf(int64_t size) { return (kBlock - size % kBlock) % kBlock; }

// A name as errors show it: control characters as '?', at most 200 bytes.
std::string Shown(const std::string& name) {
  std::string out = name.substr(0, 200);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  if (name.size() > 200) out += "...";
  return out;
}

std::string CString(const char* field, size_t len) {
  return std::string(field, strnlen(field, len));
}

// An octal field (leading spaces, then digits, then spaces or NULs), or GNU's base-256 form
// (the first byte's high bit set).
common::Result<int64_t> ParseNumber(const char* field, size_t len, const char* what) {
  const auto bad = [&](const std::string& why) {
    return common::InvalidArgument(std::string(what) + " field " + why);
  };
  const auto first = static_cast<unsigned char>(field[0]);
  if (first & 0x80) {
    if (first & 0x40) return bad("is negative");
    uint64_t v = first & 0x3f;
    for (size_t i = 1; i < len; ++i) {
      if (v > (static_cast<uint64_t>(kMaxNumber) >> 8)) return bad("is out of range");
      v = (v << 8) | static_cast<unsigned char>(field[i]);
    }
    if (v > static_cast<uint64_t>(kMaxNumber)) return bad("is out of range");
    return static_cast<int64_t>(v);
  }
  size_t i = 0;
  while (i < len && field[i] == ' ') ++i;
  uint64_t v = 0;
  for (; i < len && field[i] >= '0' && field[i] <= '7'; ++i) {
    if (v > (static_cast<uint64_t>(kMaxNumber) >> 3)) return bad("is out of range");
    v = v * 8 + static_cast<uint64_t>(field[i] - '0');
  }
  for (; i < len; ++i) {
    if (field[i] != ' ' && field[i] != '\0') return bad("is not an octal number");
  }
  return static_cast<int64_t>(v);
}

common::Result<int64_t> ParseDecimal(const std::string& s, const char* what) {
  if (s.empty() || s.size() > 19)
    return common::InvalidArgument(std::string(what) + " is not a number");
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return common::InvalidArgument(std::string(what) + " is not a number");
    v = v * 10 + (c - '0');
  }
  if (v > kMaxNumber) return common::InvalidArgument(std::string(what) + " is out of range");
  return v;
}

bool ChecksumMatches(const char* h) {
  auto stored = ParseNumber(h + 148, 8, "checksum");
  if (!stored.ok()) return false;
  int64_t unsigned_sum = 0, signed_sum = 0;
  for (size_t i = 0; i < kBlock; ++i) {
    const bool in_field = i >= 148 && i < 156;
    unsigned_sum += in_field ? ' ' : static_cast<unsigned char>(h[i]);
    signed_sum += in_field ? ' ' : static_cast<signed char>(h[i]);
  }
  // Some old writers summed signed chars; GNU tar accepts either.
  return *stored == unsigned_sum || *stored == signed_sum;
}

// The normalised relative path of `raw`; "" for the archive's root itself ("." or "./").
common::Result<std::string> NormalPath(const std::string& raw) {
  if (raw.empty()) return common::InvalidArgument("an empty name");
  if (raw.size() > kTarMaxPathBytes) {
    return common::InvalidArgument("a name longer than " + std::to_string(kTarMaxPathBytes) +
                                   " bytes");
  }
  for (char c : raw) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return common::InvalidArgument("a control character in the name");
    }
  }
  if (raw[0] == '/') return common::InvalidArgument("an absolute name (only relative ones unpack)");
  std::string out;
  size_t begin = 0;
  while (begin <= raw.size()) {
    size_t end = raw.find('/', begin);
    if (end == std::string::npos) end = raw.size();
    const std::string part = raw.substr(begin, end - begin);
    begin = end + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..")
      return common::InvalidArgument("a '..' component (it would leave the directory)");
    if (part.size() > kMaxComponentBytes) {
      return common::InvalidArgument("a component longer than " +
                                     std::to_string(kMaxComponentBytes) + " bytes");
    }
    if (!out.empty()) out += '/';
    out += part;
  }
  return out;
}

const char* RefusedType(char type) {
  switch (type) {
    case '1':
      return "a hard link";
    case '2':
      return "a symbolic link";
    case '3':
      return "a character device";
    case '4':
      return "a block device";
    case '6':
      return "a FIFO";
    case 'K':
      return "a link (GNU long link name)";
    case 'S':
      return "a sparse file";
    case 'M':
      return "a multi-volume continuation";
    case 'V':
      return "a volume label";
    case 'D':
      return "a GNU dump directory";
    default:
      return nullptr;
  }
}

}  // namespace

TarReader::TarReader(std::string name, ReadFn read, TarLimits limits)
    : name_(std::move(name)), read_(std::move(read)), limits_(limits) {}

common::Status TarReader::Fail(const common::Status& st) {
  failed_ = common::InvalidArgument(name_ + (current_.empty() ? "" : ": " + current_) + ": " +
                                    st.message());
  return failed_;
}

common::Status TarReader::ReadFully(char* buf, size_t n, const std::string& what) {
  size_t done = 0;
  while (done < n) {
    auto got = read_(buf + done, n - done);
    if (!got.ok()) return Fail(got.status());
    if (*got == 0) return Fail(common::InvalidArgument("the archive is cut short in " + what));
    done += *got;
  }
  return common::Status::Ok();
}

common::Status TarReader::Skip(int64_t n, const std::string& what) {
  char scratch[64 * 1024];
  while (n > 0) {
    const size_t step = static_cast<size_t>(std::min<int64_t>(n, sizeof scratch));
    EMBODY_RETURN_IF_ERROR(ReadFully(scratch, step, what));
    n -= static_cast<int64_t>(step);
  }
  return common::Status::Ok();
}

common::Result<std::string> TarReader::ReadMeta(int64_t size, const std::string& what) {
  if (size > static_cast<int64_t>(kTarMaxMetaBytes)) {
    return Fail(common::InvalidArgument(what + " of " + std::to_string(size) +
                                        " bytes, more than the limit of " +
                                        std::to_string(kTarMaxMetaBytes)));
  }
  std::string meta(static_cast<size_t>(size), '\0');
  EMBODY_RETURN_IF_ERROR(ReadFully(meta.data(), meta.size(), what));
  EMBODY_RETURN_IF_ERROR(Skip(PaddingOf(size), what));
  return meta;
}

common::Result<std::optional<TarEntry>> TarReader::Next() {
  if (!failed_.ok()) return failed_;
  if (done_) return std::optional<TarEntry>();
  EMBODY_RETURN_IF_ERROR(Skip(data_left_ + padding_, "the data of " + current_));
  data_left_ = padding_ = 0;
  std::optional<std::string> long_name, pax_path;
  std::optional<int64_t> pax_size;
  for (;;) {
    char h[kBlock];
    size_t got = 0;
    while (got < kBlock) {
      auto n = read_(h + got, kBlock - got);
      if (!n.ok()) return Fail(n.status());
      if (*n == 0) break;
      got += *n;
    }
    current_.clear();
    if (got == 0) {
      return Fail(common::InvalidArgument(
          "the archive ends without its end-of-archive block (cut short?)"));
    }
    if (got < kBlock) return Fail(common::InvalidArgument("the archive is cut short in a header"));
    if (std::all_of(h, h + kBlock, [](char c) { return c == 0; })) {
      if (long_name || pax_path || pax_size) {
        return Fail(common::InvalidArgument("the archive ends after a pax or long-name header"));
      }
      done_ = true;
      return std::optional<TarEntry>();
    }
    const int64_t number = ++headers_;
    const bool posix = std::memcmp(h + 257, "ustar\0", 6) == 0;
    const bool gnu = std::memcmp(h + 257, "ustar  \0", 8) == 0;
    std::string raw = CString(h, 100);
    if (posix && h[345] != '\0') raw = CString(h + 345, 155) + "/" + raw;
    current_ = "member #" + std::to_string(number) + " '" + Shown(raw) + "'";
    if (number > limits_.max_members) {
      return Fail(
          common::InvalidArgument("more than " + std::to_string(limits_.max_members) + " members"));
    }
    if (!posix && !gnu) {
      return Fail(common::InvalidArgument("not a ustar, pax or GNU tar header"));
    }
    if (!ChecksumMatches(h)) return Fail(common::InvalidArgument("header checksum mismatch"));
    auto size = ParseNumber(h + 124, 12, "size");
    if (!size.ok()) return Fail(size.status());
    const char type = h[156];
    if (type == 'x' || type == 'g') {
      EMBODY_ASSIGN_OR_RETURN(meta, ReadMeta(*size, "a pax header"));
      if (type == 'g') continue;  // global defaults: nothing here depends on them
      size_t pos = 0;
      while (pos < meta.size()) {
        const size_t space = meta.find(' ', pos);
        if (space == std::string::npos || space - pos > 19) {
          return Fail(common::InvalidArgument("a malformed pax record"));
        }
        auto len = ParseDecimal(meta.substr(pos, space - pos), "a pax record's length");
        if (!len.ok()) return Fail(len.status());
        if (*len <= static_cast<int64_t>(space - pos + 1) ||
            *len > static_cast<int64_t>(meta.size() - pos) ||
            meta[pos + static_cast<size_t>(*len) - 1] != '\n') {
          return Fail(common::InvalidArgument("a malformed pax record"));
        }
        const std::string record = meta.substr(space + 1, pos + *len - space - 2);
        pos += static_cast<size_t>(*len);
        const size_t eq = record.find('=');
        if (eq == std::string::npos) return Fail(common::InvalidArgument("a malformed pax record"));
        const std::string key = record.substr(0, eq), value = record.substr(eq + 1);
        if (key == "path") {
          pax_path = value;
        } else if (key == "size") {
          auto v = ParseDecimal(value, "the pax size");
          if (!v.ok()) return Fail(v.status());
          pax_size = *v;
        } else if (key.rfind("GNU.sparse.", 0) == 0) {
          return Fail(
              common::InvalidArgument("a sparse file (only regular files and "
                                      "directories unpack)"));
        }
      }
      continue;
    }
    if (type == 'L') {
      EMBODY_ASSIGN_OR_RETURN(meta, ReadMeta(*size, "a GNU long-name header"));
      long_name = CString(meta.data(), meta.size());
      continue;
    }
    if (const char* refused = RefusedType(type)) {
      return Fail(common::InvalidArgument(std::string(refused) +
                                          " (only regular files and directories unpack)"));
    }
    const bool file = type == '0' || type == '\0' || type == '7';
    if (!file && type != '5') {
      return Fail(common::InvalidArgument(std::string("member type '") +
                                          Shown(std::string(1, type)) +
                                          "' is not supported (only regular files and "
                                          "directories unpack)"));
    }
    if (pax_path) {
      raw = *pax_path;
    } else if (long_name) {
      raw = *long_name;
    }
    current_ = "member #" + std::to_string(number) + " '" + Shown(raw) + "'";
    const int64_t bytes = pax_size ? *pax_size : *size;
    auto path = NormalPath(raw);
    if (!path.ok()) return Fail(path.status());
    TarEntry e;
    e.type = file ? TarEntry::Type::kFile : TarEntry::Type::kDirectory;
    e.path = *path;
    e.size = file ? bytes : 0;
    e.number = number;
    if (!file && bytes != 0) {
      return Fail(
          common::InvalidArgument("a directory with " + std::to_string(bytes) + " bytes of data"));
    }
    if (file && e.path.empty()) {
      return Fail(common::InvalidArgument("a file named as the archive's root"));
    }
    if (bytes > limits_.max_file_bytes) {
      return Fail(common::InvalidArgument(std::to_string(bytes) +
                                          " bytes, more than the limit of " +
                                          std::to_string(limits_.max_file_bytes) + " per file"));
    }
    total_bytes_ += bytes;
    if (total_bytes_ > limits_.max_total_bytes) {
      return Fail(common::InvalidArgument("the files add up to more than the limit of " +
                                          std::to_string(limits_.max_total_bytes) + " bytes"));
    }
    data_left_ = bytes;
    padding_ = PaddingOf(bytes);
    long_name.reset();
    pax_path.reset();
    pax_size.reset();
    if (!file && e.path.empty()) continue;  // "./": the destination itself
    return std::optional<TarEntry>(std::move(e));
  }
}

common::Result<size_t> TarReader::ReadData(char* buf, size_t n) {
  if (!failed_.ok()) return failed_;
  const size_t step = static_cast<size_t>(std::min<int64_t>(data_left_, static_cast<int64_t>(n)));
  if (step == 0) return size_t{0};
  EMBODY_RETURN_IF_ERROR(ReadFully(buf, step, "the data of " + current_));
  data_left_ -= static_cast<int64_t>(step);
  return step;
}

namespace {

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
