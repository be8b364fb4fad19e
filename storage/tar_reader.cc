// TarReader: a tar stream read member by member (ustar, GNU and pax headers), each header
// checked and each path made relative and normal before it is handed out. ExtractTar, which
// unpacks with it, is in tar_extract.cc.
#include "storage/tar_reader.h"

#include <algorithm>
#include <cstring>

#include "storage/tar_reader_internal.h"

namespace storage {

namespace tar_internal {

std::string Shown(const std::string& name) {
  std::string out = name.substr(0, 200);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  if (name.size() > 200) out += "...";
  return out;
}

}  // namespace tar_internal

namespace {

constexpr size_t kBlock = 512;
constexpr int64_t kMaxNumber = int64_t{1} << 62;  // far past any limit; keeps sums in range
constexpr size_t kMaxComponentBytes = 255;        // NAME_MAX

int64_t PaddingOf(int64_t size) { return (kBlock - size % kBlock) % kBlock; }

using tar_internal::Shown;

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

}  // namespace storage
