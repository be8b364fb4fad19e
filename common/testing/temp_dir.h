// TempDir: a fresh directory under /tmp for one test, removed with everything in it when the
// object goes away. path() is empty when mkdtemp failed (the test's first write then fails).
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace common::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "embody") {
    std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
    path_ = ::mkdtemp(tmpl.data()) != nullptr ? tmpl : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace common::testing
