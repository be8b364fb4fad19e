// Helpers shared by the agent's tests.
#pragma once

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "common/file_util.h"

namespace agent {

// A fresh directory under /tmp, removed with everything in it when the object goes away. Mode
// 0711, as an agent's data directory needs to be for job uids to reach their directories.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = "/tmp/embody_agent_test_XXXXXX";
    path_ = ::mkdtemp(tmpl.data()) ? tmpl : "";
    if (!path_.empty()) ::chmod(path_.c_str(), 0711);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::string ReadAll(const std::string& path) {
  auto r = common::ReadFile(path);
  return r.ok() ? *r : std::string();
}

inline void AppendTo(const std::string& path, const std::string& data) {
  std::string old = ReadAll(path);
  (void)common::WriteFileAtomic(path, old + data);
}

}  // namespace agent
