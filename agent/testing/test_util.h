// Helpers shared by the agent's tests.
#pragma once

#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "common/file_util.h"

namespace agent {

// Threads of this process now.
inline int ThreadCount() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
    ::closedir(d);
  }
  return n;
}

// Waits up to 2 s for the thread count to come down to `want` (an exited thread's task entry
// may outlive its join by a moment); returns the last count seen.
inline int ThreadCountSettlingAt(int want) {
  int n = ThreadCount();
  for (int i = 0; i < 40 && n != want; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    n = ThreadCount();
  }
  return n;
}

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

// Whether `text` holds `part` anywhere (a line of an exposition, a rule of a script).
inline bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace agent
