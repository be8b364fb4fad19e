// File-system seam: the few file operations components share. Writes are atomic (temp file in
// the same directory, fsync, rename, fsync of the directory) so readers never see half a file.
#pragma once

#include <string>

#include "common/status.h"

namespace common {

// The file gets `mode` (before the umask) from its first byte on, so a secret is never readable.
Status WriteFileAtomic(const std::string& path, const std::string& contents, int mode = 0644);
Result<std::string> ReadFile(const std::string& path);
// mkdir -p
Status MakeDirs(const std::string& path);

}  // namespace common
