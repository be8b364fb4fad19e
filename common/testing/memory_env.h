// MemoryEnv: an in-memory twin of Env::Default() (LevelDB's memenv), for tests of code that
// writes through the Env seam without touching a disk. Files are byte strings keyed by path;
// directories exist once made (MakeDirs) and hold what is written under them. It keeps the
// contracts env_test.cc checks on both Envs: an atomic file is invisible until Commit, an
// abandoned one leaves nothing, writes into a missing directory fail. Rename moves files only
// (no caller renames a directory through a MemoryEnv yet). Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/env.h"

namespace common::testing {

class MemoryEnv : public Env {
 public:
  Result<std::unique_ptr<AtomicWritableFile>> NewAtomicFile(
      const std::string& path, const AtomicFileOptions& options) override;
  Result<std::string> ReadFile(const std::string& path) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Status Remove(const std::string& path) override;
  Result<std::vector<std::string>> List(const std::string& dir) override;
  Status MakeDirs(const std::string& path) override;
  Status SyncDir(const std::string& dir) override;

  // The mode a committed file was written with; -1 for no such file.
  int ModeOf(const std::string& path);

 private:
  class File;
  Status Publish(const std::string& path, std::string contents, int mode);
  bool DirExists(const std::string& dir) const;  // mu_ held

  std::mutex mu_;
  std::set<std::string> dirs_{"/", "."};
  struct Entry {
    std::string contents;
    int mode = 0644;
  };
  std::map<std::string, Entry> files_;
};

}  // namespace common::testing
