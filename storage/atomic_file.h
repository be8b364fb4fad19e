// AtomicFileWriter: writes a file in pieces so that readers see either nothing (or the old file)
// or the whole new one: bytes go to a temp file beside the destination, Commit fsyncs it, renames
// it into place and fsyncs the directory. Destroyed without Commit, the temp file is removed, so
// a failed or abandoned write leaves nothing a listing would show. Temp names start with
// ".tmp-", which no listing of this directory counts.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "common/status.h"

namespace storage {

class AtomicFileWriter {
 public:
  static common::Result<std::unique_ptr<AtomicFileWriter>> Create(const std::string& path,
                                                                  int mode = 0644);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  common::Status Append(const char* data, size_t n);
  common::Status Append(const std::string& s) { return Append(s.data(), s.size()); }
  int64_t written() const { return written_; }
  common::Status Commit();

 private:
  AtomicFileWriter(std::string path, std::string temp, int fd)
      : path_(std::move(path)), temp_(std::move(temp)), fd_(fd) {}
  std::string path_;
  std::string temp_;
  int fd_;
  int64_t written_ = 0;
  bool committed_ = false;
};

// fsync of a directory, so a rename in it survives a crash.
common::Status SyncDir(const std::string& dir);

}  // namespace storage
