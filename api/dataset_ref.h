// What names a dataset in the API, parsed and bounded in one place for the server (validation on
// POST /v1/jobs and /v1/datasets) and the engine (which opens it).
//
// `engine.data.dataset` in a JobSpec is one of:
//   "sim:reach"               the built-in scripted reach task (an endless generated stream)
//   "sim:push", "sim:pick_place"
//                             scripted-expert demonstrations of the built-in table-top tasks
//                             (engine/sim/, docs/sim.md), also endless generated streams
//   "dir:/abs/path"           a dataset directory written by embody-data
//   (storage/dataset_writer.h),
//                             read where the job runs: a local disk or a shared file system
//   "dataset:NAME[@VERSION]"  a stored dataset of the job's tenant (its newest ready version
//                             without @VERSION), resolved by the server at submit and launched
//                             as "dir:PATH" of that version
//
// The source of an import (POST /v1/datasets, and the "import" block of the job that runs it) is
// an ImportSource: either an absolute, normalised (no "." or ".." component, no "//"), printable
// path of at most kMaxImportPathBytes, or an upload {"bytes": N, "sha256": "hex"}: a file sent to
// the server in chunks (docs/storage.md), which the import job's agent fetches from the server,
// or, for an "oci" image, a pull {"registry": NAME, "reference": "REPO:TAG"} from a registry the
// operator configured (api/image_reference.h), which the import job's agent runs with skopeo.
// Whether a path exists or can be read is learnt only where the job runs, as the job's own uid.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace api {

inline constexpr char kSimReachDataset[] = "sim:reach";
inline constexpr char kSimPushDataset[] = "sim:push";
inline constexpr char kSimPickPlaceDataset[] = "sim:pick_place";
inline constexpr char kDirDatasetPrefix[] = "dir:";
inline constexpr char kDatasetRefPrefix[] = "dataset:";
inline constexpr size_t kMaxDatasetPathBytes = 1024;
inline constexpr size_t kMaxImportPathBytes = 4096;
inline constexpr size_t kMaxLanguageBytes = 1024;
inline constexpr int kMaxDatasetVersion = 1'000'000;

struct DatasetRef {
  // kSimReach: "sim:reach"; kSimTask: another built-in task, named by sim_task.
  enum class Kind { kSimReach, kDirectory, kStored, kSimTask };
  Kind kind = Kind::kSimReach;
  std::string sim_task;        // kSimTask: "push" or "pick_place"
  std::string path;            // kDirectory: absolute, without "." or ".." components
  std::string name;            // kStored: the dataset's name
  std::optional<int> version;  // kStored: nullopt for the newest ready version

  bool is_directory() const { return kind == Kind::kDirectory; }
  bool is_stored() const { return kind == Kind::kStored; }
  // A generated stream of the engine (sim:*), with the built-in sample-length distribution.
  bool is_builtin() const { return kind == Kind::kSimReach || kind == Kind::kSimTask; }
};

// True for the names of the built-in streams ("sim:reach", "sim:push", "sim:pick_place").
bool IsBuiltinDataset(const std::string& text);

// Parses and bounds a dataset reference. A directory path must be absolute, at most
// kMaxDatasetPathBytes, free of control characters and of "." and ".." components (a job names
// a dataset directory, not a walk through the file system). A stored name follows IsValidName,
// a version is an integer in [1, kMaxDatasetVersion]. Errors are invalid_argument on `field`.
common::Result<DatasetRef> ParseDatasetRef(const std::string& text,
                                           const std::string& field = "engine.data.dataset");

// The largest file an upload may declare; the server's own flag (--dataset-upload-max-gib) is
// the real bound and is usually far lower.
inline constexpr int64_t kMaxUploadDeclaredBytes = int64_t{1} << 50;

struct UploadSource {
  int64_t bytes = 0;   // 1 .. kMaxUploadDeclaredBytes
  std::string sha256;  // 64 lower-case hex characters
};

inline constexpr char kImportFormatHdf5[] = "hdf5";
inline constexpr char kImportFormatLerobot[] = "lerobot";
// An OCI image layout tar (oci-layout, index.json, blobs/sha256/...: what `umoci`, `skopeo copy
// ... oci-archive:F` and `podman save --format oci-archive` write): stored as a version like any
// dataset, and run by a command job naming it as "environment": {"image": NAME} (docs/byo.md).
inline constexpr char kImportFormatOci[] = "oci";
// The largest side --resize accepts (embody-data's own bound).
inline constexpr int kMaxImportResizeSide = 16384;

// Who wrote an ImportSource: a tenant (POST /v1/datasets, a pipeline), or the server (the
// import job's spec), which adds the URL of the registry a pull names ("registry_url").
enum class ImportSourceFrom { kTenant, kServer };

struct ImportSource {
  // "hdf5": one robomimic / LIBERO file (path or upload). "lerobot": a LeRobot dataset
  // directory (v2.x, v3.0, or the older episodes.jsonl layout): its path, or an upload of a
  // tar of it, which the import job unpacks (storage/tar_reader.h) before importing.
  std::string format = kImportFormatHdf5;
  std::string path;                    // absolute path, as the import job sees it; "" for an upload
  std::optional<UploadSource> upload;  // exactly one of path, upload and registry
  // "oci" only: a pull. `registry` names a configured registry (its name or HOST[:PORT] as the
  // tenant gave it; the server stores its name), `reference` the image in it
  // (api/image_reference.h), and `registry_url` (written by the server) where it is.
  std::string registry;
  std::string reference;
  std::string registry_url;
  std::string filter;                  // hdf5: mask/<filter> of the file; "": every demo
  std::string language;   // instruction overriding the file's (hdf5) or the tasks (lerobot)
  bool skip_nan = false;  // hdf5: "nan": "skip" drops demos with NaN/Inf actions
  int resize_height = 0;  // lerobot: "resize": "HxW" decodes every camera to H x W; 0: as is
  int resize_width = 0;

  bool is_lerobot() const { return format == kImportFormatLerobot; }
  bool is_oci() const { return format == kImportFormatOci; }
  bool is_pull() const { return !registry.empty(); }
};

// `j` is the "source" object; `field` prefixes the field named in errors ("source").
// Exactly one of "path", "upload" and "registry" is required; "registry" (with "reference") is
// for "oci" only, and "registry_url" is the server's to write (kServer: required with a
// registry; kTenant: refused). "lerobot" takes "resize" and "language", and
// refuses the HDF5 options ("filter", "nan") and a path that names an HDF5 file by its
// extension. Whether the path is a directory is learnt where the job runs
// (the server never looks at tenant paths): embody-data fails the import, naming it.
common::Result<ImportSource> ParseImportSource(const nlohmann::json& j, const std::string& field,
                                               ImportSourceFrom from = ImportSourceFrom::kTenant);
nlohmann::json ToJson(const ImportSource& s);
// "HxW" of a source with a resize, as embody-data's --resize takes it.
std::string ResizeText(const ImportSource& s);

// 64 lower-case hex characters.
bool IsSha256Hex(const std::string& s);

// Dataset and job names: 1-128 letters, digits, '-', '_' or '.'.
bool IsValidName(const std::string& name);

}  // namespace api
