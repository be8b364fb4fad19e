// What names a dataset in the API: the source of an import (POST /v1/datasets, and the
// "import" block of the job that runs it) and a training job's reference to a stored dataset,
// "dataset:NAME" (its newest ready version) or "dataset:NAME@VERSION".
//
// Both are tenant input and are bounded here: an import path is absolute, normalised (no "."
// or ".." component, no "//"), printable, at most kMaxImportPathBytes; names follow the JobSpec's
// name rule. Whether the path exists or can be read is learnt only when the import job runs,
// as the job's own uid.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace api {

inline constexpr size_t kMaxImportPathBytes = 4096;
inline constexpr size_t kMaxLanguageBytes = 1024;
inline constexpr int kMaxDatasetVersion = 1'000'000;

struct ImportSource {
  std::string format = "hdf5";  // the only one built
  std::string path;             // absolute path of the file, as the import job sees it
  std::string filter;           // mask/<filter> of the HDF5 file; "": every demo
  std::string language;         // instruction overriding the file's; "": the file's
};

// `j` is the "source" object; `field` prefixes the field named in errors ("source").
common::Result<ImportSource> ParseImportSource(const nlohmann::json& j, const std::string& field);
nlohmann::json ToJson(const ImportSource& s);

// Dataset and job names: 1-128 letters, digits, '-', '_' or '.'.
bool IsValidName(const std::string& name);

struct DatasetRef {
  std::string name;
  std::optional<int> version;  // nullopt: the newest ready one
};
inline constexpr char kDatasetRefPrefix[] = "dataset:";
// nullopt when `text` does not start with "dataset:"; invalid_argument (naming `field`) when it
// does but is malformed.
common::Result<std::optional<DatasetRef>> ParseDatasetRef(const std::string& text,
                                                          const std::string& field);

}  // namespace api
