// What the tar reader (tar_reader.cc) and the extraction on top of it (tar_extract.cc) share. Not
// part of the storage/ interface; use tar_reader.h.
#pragma once

#include <string>

namespace storage::tar_internal {

// A name as errors show it: control characters as '?', at most 200 bytes.
std::string Shown(const std::string& name);

}  // namespace storage::tar_internal
