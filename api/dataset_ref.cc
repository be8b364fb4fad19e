// Dataset references and import sources (api/dataset_ref.h): the bounds on tenant input that
// names data.
#include "api/dataset_ref.h"

#include <utility>

#include "api/image_reference.h"
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

// An import source names one file the way the user wrote it, with nothing to resolve: "..",
// "." and empty components (//, a trailing /) are all refused.
common::Status CheckImportPath(const std::string& path, const std::string& field) {
  if (path.empty() || path.front() != '/')
    return InvalidArgument("must be an absolute path", field);
  if (path.size() > kMaxImportPathBytes) {
    return InvalidArgument("longer than " + std::to_string(kMaxImportPathBytes) + " bytes", field);
  }
  if (!Printable(path)) return InvalidArgument("must not hold control characters", field);
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

common::Result<DatasetRef> ParseDirectory(std::string path, const std::string& field) {
  if (path.empty() || path[0] != '/') {
    return InvalidArgument("dir: needs an absolute path, got \"" + path + "\"", field);
  }
  if (path.size() > kMaxDatasetPathBytes) {
    return InvalidArgument("dataset path is " + std::to_string(path.size()) + " bytes, more than " +
                               std::to_string(kMaxDatasetPathBytes),
                           field);
  }
  if (!Printable(path)) {
    return InvalidArgument("dataset path contains a control character", field);
  }
  // Components between slashes; empty ones ("//", a trailing "/") are harmless for a directory.
  size_t begin = 1;
  while (begin <= path.size()) {
    size_t end = path.find('/', begin);
    if (end == std::string::npos) end = path.size();
    const std::string part = path.substr(begin, end - begin);
    if (part == "." || part == "..") {
      return InvalidArgument("dataset path must not contain \".\" or \"..\" components", field);
    }
    begin = end + 1;
  }
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  DatasetRef ref;
  ref.kind = DatasetRef::Kind::kDirectory;
  ref.path = std::move(path);
  return ref;
}

common::Result<DatasetRef> ParseStored(const std::string& rest, const std::string& field) {
  DatasetRef ref;
  ref.kind = DatasetRef::Kind::kStored;
  const size_t at = rest.find('@');
  ref.name = rest.substr(0, at);
  if (!IsValidName(ref.name)) {
    return InvalidArgument(
        "\"dataset:NAME[@VERSION]\": NAME must be 1-128 letters, digits, '-', "
        "'_' or '.'",
        field);
  }
  if (at != std::string::npos) {
    auto v = common::ParseInt64(rest.substr(at + 1), 1, kMaxDatasetVersion);
    if (!v.ok()) {
      return InvalidArgument("\"dataset:NAME@VERSION\": VERSION must be an integer from 1 to " +
                                 std::to_string(kMaxDatasetVersion),
                             field);
    }
    ref.version = static_cast<int>(*v);
  }
  return ref;
}

}  // namespace

bool IsBuiltinDataset(const std::string& text) {
  return text == kSimReachDataset || text == kSimPushDataset || text == kSimPickPlaceDataset;
}

common::Result<DatasetRef> ParseDatasetRef(const std::string& text, const std::string& field) {
  if (text == kSimReachDataset) return DatasetRef{};
  if (text == kSimPushDataset || text == kSimPickPlaceDataset) {
    DatasetRef ref;
    ref.kind = DatasetRef::Kind::kSimTask;
    ref.sim_task = text.substr(4);  // after "sim:"
    return ref;
  }
  const std::string dir = kDirDatasetPrefix;
  if (text.rfind(dir, 0) == 0) return ParseDirectory(text.substr(dir.size()), field);
  const std::string stored = kDatasetRefPrefix;
  if (text.rfind(stored, 0) == 0) return ParseStored(text.substr(stored.size()), field);
  return InvalidArgument(
      "must be \"sim:reach\", \"sim:push\", \"sim:pick_place\", \"dir:/absolute/path\" (a "
      "directory made by embody-data) or "
      "\"dataset:NAME[@VERSION]\" (a stored dataset)",
      field);
}

bool IsValidName(const std::string& s) {
  if (s.empty() || s.size() > 128) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

namespace {

common::Result<UploadSource> ParseUpload(const json& j, const std::string& field) {
  if (!j.is_object()) return InvalidArgument("must be an object", field);
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() != "bytes" && it.key() != "sha256") {
      return InvalidArgument("unknown field", field + "." + it.key());
    }
  }
  UploadSource u;
  const bool in_range =
      j.contains("bytes") && j["bytes"].is_number_integer() &&
      (j["bytes"].is_number_unsigned()
           ? j["bytes"].get<uint64_t>() <= static_cast<uint64_t>(kMaxUploadDeclaredBytes)
           : j["bytes"].get<int64_t>() >= 1 && j["bytes"].get<int64_t>() <= kMaxUploadDeclaredBytes);
  if (!in_range || j["bytes"].get<int64_t>() < 1) {
    return InvalidArgument("must be an integer from 1 to 2^50", field + ".bytes");
  }
  u.bytes = j["bytes"].get<int64_t>();
  if (!j.contains("sha256") || !j["sha256"].is_string() ||
      !IsSha256Hex(j["sha256"].get<std::string>())) {
    return InvalidArgument("must be 64 lower-case hex characters", field + ".sha256");
  }
  u.sha256 = j["sha256"].get<std::string>();
  return u;
}

// "HxW": height then width, as embody-data's --resize takes it.
common::Result<std::pair<int, int>> ParseResize(const std::string& text, const std::string& field) {
  const std::string bad = "must be HxW (height x width, each 1-" +
                          std::to_string(kMaxImportResizeSide) + "), e.g. \"224x224\"";
  const size_t x = text.find('x');
  if (x == std::string::npos) return InvalidArgument(bad, field);
  auto h = common::ParseInt(std::string_view(text).substr(0, x), 1, kMaxImportResizeSide);
  auto w = common::ParseInt(std::string_view(text).substr(x + 1), 1, kMaxImportResizeSide);
  if (!h.ok() || !w.ok()) return InvalidArgument(bad, field);
  return std::pair<int, int>(*h, *w);
}

// What a LeRobot source may not say: filter and nan are HDF5 notions (mask/<F>, per-demo NaN
// policy) that the LeRobot importer has no counterpart for, so they are refused rather than
// silently ignored. (An upload of a LeRobot dataset is a tar of its directory.)
common::Status CheckLerobotFields(const json& j, const std::string& field) {
  for (const char* hdf5_only : {"filter", "nan"}) {
    if (j.contains(hdf5_only)) {
      return InvalidArgument("applies to \"hdf5\" imports only", field + "." + hdf5_only);
    }
  }
  if (!j.contains("path")) return common::Status::Ok();
  // The one file-for-directory mistake the server can see without touching the path.
  const std::string path = j["path"].get<std::string>();
  for (const char* ext : {".hdf5", ".h5", ".hdf"}) {
    const std::string e = ext;
    if (path.size() > e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0) {
      return InvalidArgument(
          "a LeRobot dataset is a directory (with meta/info.json), and this names an HDF5 "
          "file; import it with \"format\": \"hdf5\"",
          field + ".path");
    }
  }
  return common::Status::Ok();
}

// {"format": "oci", "registry": NAME, "reference": "REPO:TAG"} (+ "registry_url" from the
// server): an image pulled from a configured registry, with nothing else.
common::Result<ImportSource> ParsePull(const json& j, const std::string& field, ImportSource s,
                                       ImportSourceFrom from) {
  if (!s.is_oci()) {
    return InvalidArgument("a pull from a registry is an \"oci\" import: give \"format\": \"oci\"",
                           field + ".format");
  }
  for (const char* key : {"registry", "reference"}) {
    if (!j.contains(key)) return InvalidArgument("is required for a pull", field + "." + key);
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() != "format" && it.key() != "registry" && it.key() != "reference" &&
        it.key() != "registry_url") {
      return InvalidArgument("does not apply to a pull from a registry", field + "." + it.key());
    }
  }
  s.registry = j["registry"].get<std::string>();
  // A configured name, or HOST[:PORT]: which one is the server's to say (FindImageRegistry).
  if (s.registry.empty() || s.registry.size() > 260 || s.registry.front() == '-' ||
      s.registry.find_first_of(" /@\t\n\r") != std::string::npos || !Printable(s.registry)) {
    return InvalidArgument("must be the name of a registry the operator configured",
                           field + ".registry");
  }
  EMBODY_ASSIGN_OR_RETURN(ref, ParseImageReference(j["reference"].get<std::string>(),
                                                   field + ".reference"));
  s.reference = ref.ToString();
  if (from == ImportSourceFrom::kServer) {
    if (!j.contains("registry_url")) {
      return InvalidArgument("is required in an import job's pull", field + ".registry_url");
    }
    s.registry_url = j["registry_url"].get<std::string>();
    EMBODY_ASSIGN_OR_RETURN(registry,
                            ParseRegistryUrl(s.registry, s.registry_url, field + ".registry_url"));
    (void)registry;
  }
  return s;
}

}  // namespace

bool IsSha256Hex(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

common::Result<ImportSource> ParseImportSource(const json& j, const std::string& field,
                                               ImportSourceFrom from) {
  if (!j.is_object()) return InvalidArgument("must be an object", field);
  ImportSource s;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string key = it.key();
    const std::string where = field + "." + key;
    const bool server_key = key == "registry_url" && from == ImportSourceFrom::kServer;
    if (key != "format" && key != "path" && key != "upload" && key != "filter" &&
        key != "language" && key != "nan" && key != "resize" && key != "registry" &&
        key != "reference" && !server_key) {
      return InvalidArgument("unknown field", where);
    }
    if (key != "upload" && !it->is_string()) return InvalidArgument("must be a string", where);
  }
  if (j.contains("format")) s.format = j["format"].get<std::string>();
  if (s.format != kImportFormatHdf5 && s.format != kImportFormatLerobot &&
      s.format != kImportFormatOci) {
    return common::Status(common::Code::kUnimplemented,
                          "only \"hdf5\" (robomimic / LIBERO layout), \"lerobot\" (a LeRobot "
                          "dataset directory, v2.x or v3.0) and \"oci\" (an OCI image layout "
                          "tar) can be imported",
                          field + ".format");
  }
  if (j.contains("registry") || j.contains("reference") || j.contains("registry_url")) {
    return ParsePull(j, field, std::move(s), from);
  }
  if (j.contains("path") == j.contains("upload")) {
    return InvalidArgument(
        "exactly one of \"path\" (a file the nodes read) and \"upload\" (a file sent to the "
        "server in chunks) is required",
        field + (j.contains("path") ? ".upload" : ".path"));
  }
  if (s.is_lerobot()) EMBODY_RETURN_IF_ERROR(CheckLerobotFields(j, field));
  if (s.is_oci()) {
    // An image has no demos, instruction or cameras.
    for (const char* data_only : {"filter", "nan", "language", "resize"}) {
      if (j.contains(data_only)) {
        return InvalidArgument("does not apply to an \"oci\" image", field + "." + data_only);
      }
    }
  }
  if (j.contains("upload")) {
    EMBODY_ASSIGN_OR_RETURN(u, ParseUpload(j["upload"], field + ".upload"));
    s.upload = u;
  } else {
    s.path = j["path"].get<std::string>();
    EMBODY_RETURN_IF_ERROR(CheckImportPath(s.path, field + ".path"));
  }
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
  if (j.contains("nan")) {
    const std::string nan = j["nan"].get<std::string>();
    if (nan != "refuse" && nan != "skip") {
      return InvalidArgument(
          "must be \"refuse\" (a demo with NaN or Inf actions fails the import) or \"skip\" "
          "(such demos are left out and counted)",
          field + ".nan");
    }
    s.skip_nan = nan == "skip";
  }
  if (j.contains("resize")) {
    // The HDF5 importer takes images as stored; only decoded video can be scaled on the way.
    if (!s.is_lerobot()) {
      return InvalidArgument("applies to \"lerobot\" imports only", field + ".resize");
    }
    EMBODY_ASSIGN_OR_RETURN(hw, ParseResize(j["resize"].get<std::string>(), field + ".resize"));
    s.resize_height = hw.first;
    s.resize_width = hw.second;
  }
  return s;
}

std::string ResizeText(const ImportSource& s) {
  return std::to_string(s.resize_height) + "x" + std::to_string(s.resize_width);
}

json ToJson(const ImportSource& s) {
  json j{{"format", s.format}};
  if (s.is_pull()) {
    j["registry"] = s.registry;
    j["reference"] = s.reference;
    if (!s.registry_url.empty()) j["registry_url"] = s.registry_url;
  } else if (s.upload) {
    j["upload"] = {{"bytes", s.upload->bytes}, {"sha256", s.upload->sha256}};
  } else {
    j["path"] = s.path;
  }
  if (!s.filter.empty()) j["filter"] = s.filter;
  if (!s.language.empty()) j["language"] = s.language;
  if (s.skip_nan) j["nan"] = "skip";
  if (s.resize_height > 0) j["resize"] = ResizeText(s);
  return j;
}

}  // namespace api
