// Env: the one seam between Embody and the file system, after LevelDB's Env. What a component
// writes so that readers never see half of it goes through here: a file written in pieces that
// appears under its name only when complete (AtomicWritableFile), or whole in one call
// (WriteFileAtomic), plus the few directory operations the callers need. Env::Default() is the
// real (POSIX) file system; common/testing/memory_env.h is an in-memory twin for tests, and
// env_test.cc runs one conformance suite on both.
//
// Not here: files read at offsets by many threads (storage/file.h RandomAccessFile), part files
// written at offsets on the server (controlplane/service/blob_files.h), and directory trees
// published by one rename (the dataset writer's and exporter's staging directories).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace common {

// Written to a temp file beside `path()`; Commit() syncs it, renames it into place and syncs
// the directory. Destroyed without a successful Commit, the temp file is removed, so a failed
// or abandoned write leaves nothing; a crash leaves only a temp name (see TempName).
class AtomicWritableFile {
 public:
  virtual ~AtomicWritableFile() = default;
  virtual Status Append(const void* data, size_t n) = 0;
  Status Append(const std::string& s) { return Append(s.data(), s.size()); }
  virtual uint64_t size() const = 0;  // bytes appended so far
  virtual const std::string& path() const = 0;
  virtual Status Commit() = 0;
};

// How the temp file is named. kHidden: "<dir>/.tmp-<random>", created exclusively, never followed
// through a link; no listing of a directory counts names starting ".tmp-". kBeside: "<path>.tmp"
// (the shard formats' convention: no reader opens a *.tmp name); a stale one is replaced.
enum class TempName { kHidden, kBeside };

struct AtomicFileOptions {
  int mode = 0644;  // the file's mode from its first byte on, exactly (a secret is never readable)
  TempName temp = TempName::kHidden;
};

class Env {
 public:
  // The process's file system. Never null; lives for the whole process.
  static Env* Default();
  virtual ~Env() = default;

  virtual Result<std::unique_ptr<AtomicWritableFile>> NewAtomicFile(
      const std::string& path, const AtomicFileOptions& options) = 0;
  // The one atomic whole-file write: NewAtomicFile, Append, Commit.
  Status WriteFileAtomic(const std::string& path, const std::string& contents, int mode = 0644);

  // not_found when the file cannot be opened.
  virtual Result<std::string> ReadFile(const std::string& path) = 0;
  // Renames a file or directory (replacing a file at `to`) and syncs `to`'s directory.
  virtual Status Rename(const std::string& from, const std::string& to) = 0;
  // Removes a file; one that is missing already is fine.
  virtual Status Remove(const std::string& path) = 0;
  // The names in `dir` (not "." or ".."), sorted; not_found when `dir` does not exist.
  virtual Result<std::vector<std::string>> List(const std::string& dir) = 0;
  // mkdir -p
  virtual Status MakeDirs(const std::string& path) = 0;
  // fsync of a directory, so a rename or create inside it survives a crash.
  virtual Status SyncDir(const std::string& dir) = 0;
};

// Up to `n` bytes at `offset` of an open descriptor (pread, EINTR retried); fewer only at the end
// of the file. For readers of open files: a blob being served, a checkpoint being uploaded.
Result<std::string> ReadAt(int fd, int64_t offset, size_t n);

// "a/b/c" -> "a/b"; "c" -> "."; "/c" -> "/".
std::string DirName(const std::string& path);

}  // namespace common
