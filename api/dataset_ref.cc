#include "api/dataset_ref.h"

namespace api {

common::Result<DatasetRef> ParseDatasetRef(const std::string& text, const std::string& field) {
  DatasetRef ref;
  if (text == kSimReachDataset) return ref;
  const std::string prefix = kDirDatasetPrefix;
  if (text.rfind(prefix, 0) != 0) {
    return common::InvalidArgument(
        "must be \"sim:reach\" or \"dir:/absolute/path\" (a directory made by embody-data)", field);
  }
  std::string path = text.substr(prefix.size());
  if (path.empty() || path[0] != '/') {
    return common::InvalidArgument("dir: needs an absolute path, got \"" + path + "\"", field);
  }
  if (path.size() > kMaxDatasetPathBytes) {
    return common::InvalidArgument("dataset path is " + std::to_string(path.size()) +
                                       " bytes, more than " + std::to_string(kMaxDatasetPathBytes),
                                   field);
  }
  for (unsigned char c : path) {
    if (c < 0x20 || c == 0x7f) {
      return common::InvalidArgument("dataset path contains a control character", field);
    }
  }
  // Components between slashes; empty ones ("//", a trailing "/") are harmless.
  size_t begin = 1;
  while (begin <= path.size()) {
    size_t end = path.find('/', begin);
    if (end == std::string::npos) end = path.size();
    const std::string part = path.substr(begin, end - begin);
    if (part == "." || part == "..") {
      return common::InvalidArgument("dataset path must not contain \".\" or \"..\" components",
                                     field);
    }
    begin = end + 1;
  }
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  ref.kind = DatasetRef::Kind::kDirectory;
  ref.path = std::move(path);
  return ref;
}

}  // namespace api
