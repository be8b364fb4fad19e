// Shortcuts to Env::Default() (common/env.h) for the many callers that write or read one whole
// file on the real file system. Writes are atomic (temp file in the same directory, fsync,
// rename, fsync of the directory) so readers never see half a file.
#pragma once

#include <string>

#include "common/env.h"
#include "common/status.h"

namespace common {

// The file gets `mode` from its first byte on, exactly, so a secret is never readable.
inline Status WriteFileAtomic(const std::string& path, const std::string& contents,
                              int mode = 0644) {
  return Env::Default()->WriteFileAtomic(path, contents, mode);
}
inline Result<std::string> ReadFile(const std::string& path) {
  return Env::Default()->ReadFile(path);
}
// mkdir -p
inline Status MakeDirs(const std::string& path) { return Env::Default()->MakeDirs(path); }

}  // namespace common
