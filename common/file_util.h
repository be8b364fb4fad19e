// File-system seam: the few file operations components share. Writes are atomic (temp file in
// the same directory, fsync, rename, fsync of the directory) so readers never see half a file.
#pragma once

#include <string>

#include "common/status.h"

namespace common {

Status WriteFileAtomic(const std::string& path, const std::string& contents);
Result<std::string> ReadFile(const std::string& path);
// mkdir -p
Status MakeDirs(const std::string& path);

}  // namespace common
