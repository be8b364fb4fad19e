// What `engine.data.dataset` in a JobSpec names, parsed in one place for the server (validation
// on POST /v1/jobs) and the engine (which opens it):
//
//   "sim:reach"           the built-in scripted reach task (an endless generated stream)
//   "dir:/abs/path"       a dataset directory written by embody-data (storage/dataset_writer.h),
//                         read where the job runs: a local disk or a shared file system
//
// A name resolved by the server from its dataset manifest ("dataset:<name>") is a further case
// here when the control plane keeps datasets.
#pragma once

#include <string>

#include "common/status.h"

namespace api {

inline constexpr char kSimReachDataset[] = "sim:reach";
inline constexpr char kDirDatasetPrefix[] = "dir:";
inline constexpr size_t kMaxDatasetPathBytes = 1024;

struct DatasetRef {
  enum class Kind { kSimReach, kDirectory };
  Kind kind = Kind::kSimReach;
  std::string path;  // kDirectory: absolute, without "." or ".." components

  bool is_directory() const { return kind == Kind::kDirectory; }
};

// Parses and bounds a dataset reference. A directory path must be absolute, at most
// kMaxDatasetPathBytes, free of control characters and of "." and ".." components (a job names
// a dataset directory, not a walk through the file system). Errors are invalid_argument on
// `field`.
common::Result<DatasetRef> ParseDatasetRef(const std::string& text,
                                           const std::string& field = "engine.data.dataset");

}  // namespace api
