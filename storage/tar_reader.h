// Reads tar archives (POSIX ustar and pax, GNU tar's long names) and unpacks them safely: the
// way a LeRobot dataset directory sent as an upload (docs/storage.md "Uploading a LeRobot
// directory") becomes a directory again on the node that imports it. The archive is untrusted.
//
// Accepted: regular files and directories, named by relative paths. Refused, with the archive,
// the member's number (#1 is the first header) and its name in the message:
//   - symbolic and hard links, character and block devices, FIFOs, sparse and multi-volume
//     members, and any type this reader does not know;
//   - absolute names, a ".." component, control characters, a name over kTarMaxPathBytes or a
//     component over 255 bytes ("." and empty components are dropped: "./meta//info.json" is
//     "meta/info.json");
//   - more than max_members headers, a file over max_file_bytes, files adding up to more than
//     max_total_bytes, a pax or GNU long-name header over kTarMaxMetaBytes;
//   - a header whose checksum or numbers do not parse, an archive cut short (including one that
//     ends without its end-of-archive block), a file named twice, or a name that walks through
//     a file.
// Nothing is allocated by a size read from the archive before it is bounded.
//
// It is not a general tar tool: modes, owners and times in the archive are ignored (files are
// written 0600, directories 0700, owned by whoever unpacks), and nothing is ever written outside
// the destination, which ExtractTar creates itself and removes again on any failure.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "common/status.h"

namespace storage {

inline constexpr int64_t kTarMaxMembers = int64_t{1} << 21;     // headers, 2,097,152
inline constexpr int64_t kTarMaxFileBytes = int64_t{64} << 30;  // one member, 64 GiB
inline constexpr int64_t kTarMaxTotalBytes = int64_t{1} << 40;  // all members, 1 TiB
inline constexpr size_t kTarMaxPathBytes = 4096;                // a member's name
inline constexpr size_t kTarMaxMetaBytes = size_t{1} << 20;     // one pax / long-name header

struct TarLimits {
  int64_t max_members = kTarMaxMembers;
  int64_t max_file_bytes = kTarMaxFileBytes;
  int64_t max_total_bytes = kTarMaxTotalBytes;
};

struct TarEntry {
  enum class Type { kFile, kDirectory };
  Type type = Type::kFile;
  std::string path;    // normalised: relative, no "", "." or ".." component, no trailing '/'
  int64_t size = 0;    // bytes of data (0 for a directory)
  int64_t number = 0;  // the header's position in the archive, from 1
};

// A sequential reader over any byte stream. Not thread-safe.
class TarReader {
 public:
  // `read(buf, n)` fills up to n bytes and returns how many (0 only at the end of the stream).
  using ReadFn = std::function<common::Result<size_t>(char* buf, size_t n)>;
  // `name` is how errors call the archive.
  TarReader(std::string name, ReadFn read, TarLimits limits = {});

  // The next file or directory (skipping what is left of the previous one's data); nullopt at
  // the end-of-archive block. After an error the reader is spent.
  common::Result<std::optional<TarEntry>> Next();
  // Up to n bytes of the current file's data; 0 once it is all read.
  common::Result<size_t> ReadData(char* buf, size_t n);

 private:
  common::Status ReadFully(char* buf, size_t n, const std::string& what);
  common::Status Skip(int64_t n, const std::string& what);
  common::Result<std::string> ReadMeta(int64_t size, const std::string& what);
  common::Status Fail(const common::Status& st);

  std::string name_;
  ReadFn read_;
  TarLimits limits_;
  int64_t headers_ = 0;
  int64_t total_bytes_ = 0;
  int64_t data_left_ = 0;  // of the current member
  int64_t padding_ = 0;    // after it, to the next 512-byte block
  std::string current_;    // the current member, as errors name it
  bool done_ = false;
  common::Status failed_;
};

struct TarExtractStats {
  int64_t files = 0;
  int64_t directories = 0;
  int64_t bytes = 0;
};

// Unpacks the tar file `archive` into `dest`, which must not exist (it is created 0700; its
// parent must exist). On any error `dest` is removed and the error names the member.
common::Result<TarExtractStats> ExtractTar(const std::string& archive, const std::string& dest,
                                           const TarLimits& limits = {});

}  // namespace storage
