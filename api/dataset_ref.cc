#include "api/dataset_ref.h"

#include "common/parse_int.h"

namespace api {

using common::InvalidArgument;
using nlohmann::json;

namespace {

bool Printable(const std::string& s) {
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) return false;
  }
  return true;
}

common::Status CheckPath(const std::string& path, const std::string& field) {
  if (path.empty() || path.front() != '/') return InvalidArgument("must be an absolute path", field);
  if (path.size() > kMaxImportPathBytes) {
    return InvalidArgument("longer than " + std::to_string(kMaxImportPathBytes) + " bytes", field);
  }
  if (!Printable(path)) return InvalidArgument("must not hold control characters", field);
  // Component by component: "..", "." and empty components (//, a trailing /) are refused, so
  // the path names one file the way the user wrote it, with nothing to resolve.
  size_t start = 1;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    const std::string part = path.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") {
      return InvalidArgument("must be a normalised absolute path (no \"..\", \".\" or \"//\")",
                             field);
    }
    start = end + 1;
  }
  return common::Status::Ok();
}

}  // namespace

bool IsValidName(const std::string& s) {
  if (s.empty() || s.size() > 128) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

common::Result<ImportSource> ParseImportSource(const json& j, const std::string& field) {
  if (!j.is_object()) return InvalidArgument("must be an object", field);
  ImportSource s;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string key = it.key();
    const std::string where = field + "." + key;
    if (key != "format" && key != "path" && key != "filter" && key != "language") {
      return InvalidArgument("unknown field", where);
    }
    if (!it->is_string()) return InvalidArgument("must be a string", where);
  }
  if (j.contains("format")) s.format = j["format"].get<std::string>();
  if (s.format != "hdf5") {
    return common::Status(common::Code::kUnimplemented,
                          "only \"hdf5\" (robomimic / LIBERO layout) can be imported", field + ".format");
  }
  if (!j.contains("path")) return InvalidArgument("is required", field + ".path");
  s.path = j["path"].get<std::string>();
  EMBODY_RETURN_IF_ERROR(CheckPath(s.path, field + ".path"));
  if (j.contains("filter")) {
    s.filter = j["filter"].get<std::string>();
    if (!IsValidName(s.filter)) {
      return InvalidArgument("must be 1-128 letters, digits, '-', '_' or '.'", field + ".filter");
    }
  }
  if (j.contains("language")) {
    s.language = j["language"].get<std::string>();
    if (s.language.size() > kMaxLanguageBytes || !Printable(s.language)) {
      return InvalidArgument("must be at most " + std::to_string(kMaxLanguageBytes) +
                                 " bytes without control characters",
                             field + ".language");
    }
  }
  return s;
}

json ToJson(const ImportSource& s) {
  json j{{"format", s.format}, {"path", s.path}};
  if (!s.filter.empty()) j["filter"] = s.filter;
  if (!s.language.empty()) j["language"] = s.language;
  return j;
}

common::Result<std::optional<DatasetRef>> ParseDatasetRef(const std::string& text,
                                                          const std::string& field) {
  const std::string prefix = kDatasetRefPrefix;
  if (text.rfind(prefix, 0) != 0) return std::optional<DatasetRef>();
  std::string rest = text.substr(prefix.size());
  DatasetRef ref;
  const size_t at = rest.find('@');
  ref.name = rest.substr(0, at);
  if (!IsValidName(ref.name)) {
    return InvalidArgument("\"dataset:NAME[@VERSION]\": NAME must be 1-128 letters, digits, '-', "
                           "'_' or '.'",
                           field);
  }
  if (at != std::string::npos) {
    auto v = common::ParseInt64(rest.substr(at + 1), 1);
    if (!v.ok() || *v > kMaxDatasetVersion) {
      return InvalidArgument("\"dataset:NAME@VERSION\": VERSION must be an integer from 1", field);
    }
    ref.version = static_cast<int>(*v);
  }
  return std::optional<DatasetRef>(std::move(ref));
}

}  // namespace api
