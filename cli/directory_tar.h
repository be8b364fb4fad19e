// A local directory as a POSIX tar stream, read by offset: what `embody datasets upload NAME DIR
// --format lerobot` sends (docs/storage.md "Uploading a LeRobot directory").
//
// The stream is never written to disk. Open() walks the directory once and lays the archive out
// (every member's offset follows from the names and sizes); Read(offset, n) then builds headers
// on demand and reads file data with pread. So a multi-gigabyte dataset needs no temporary copy,
// the upload hashes it in one pass and sends it in a second, a retried chunk or `--resume` reads
// any offset directly, and the bytes are a function of the directory alone: names in byte order,
// owners 0, modes 0644/0755, the files' own modification times. A file that changes size between
// the passes is an error here; one that changes its bytes fails the upload's SHA-256 check at
// commit.
//
// Format: ustar headers; a pax extended header ('x', path=, size=) before a member whose name
// does not fit ustar's name/prefix fields or whose size is 8 GiB or more. Members are regular
// files and directories only: symbolic links are followed (a Hugging Face cache is links into
// its blob store), a link cycle and any other kind of file (FIFO, socket, device) are refused.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace cli {

class DirectoryTar {
 public:
  static common::Result<std::unique_ptr<DirectoryTar>> Open(const std::string& dir);

  int64_t size() const { return size_; }
  int64_t files() const { return files_; }
  // Up to n bytes from `offset` (fewer only at the end).
  common::Result<std::string> Read(int64_t offset, size_t n) const;

  struct Member {
    std::string name;    // relative, '/'-separated; a directory's ends with '/'
    std::string source;  // the file read for the data ("" for a directory)
    int64_t size = 0;
    int64_t mtime = 0;
    int64_t offset = 0;        // of its first header block in the stream
    int64_t header_bytes = 0;  // ustar header, plus the pax header before it if any
  };

 private:
  explicit DirectoryTar(std::string dir) : dir_(std::move(dir)) {}
  std::string Headers(const Member& m) const;

  std::string dir_;
  std::vector<Member> members_;
  int64_t size_ = 0;
  int64_t files_ = 0;
};

}  // namespace cli
