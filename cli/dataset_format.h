// Terminal rendering of datasets (GET /v1/datasets, GET /v1/datasets/{id}, POST /v1/datasets),
// read through their views (api/v1/dataset.h), and the body of POST /v1/datasets. Null values
// print as "-".
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "api/v1/dataset.h"

namespace cli {

// ID NAME VERSION STATE EPISODES FRAMES SIZE JOB CREATED
std::string DatasetsTable(const api::v1::DatasetList& reply);
// "key: value" lines: identity, state (with progress while importing, the error when failed),
// counts, where it came from and where it is, and the statistics' keys with their shapes.
std::string DatasetDetail(const api::v1::DatasetDetail& detail);
// The line after an import or pull was queued: "dataset 7 (lift version 3) importing as job
// 41; follow it with `embody datasets show 7`"; `doing` says what the job does.
std::string DatasetQueuedLine(const api::v1::Dataset& d, const std::string& doing);

// What `embody datasets import` sends; empty strings are left out of the source.
struct DatasetImportFlags {
  std::string format = "hdf5";  // "hdf5" or "lerobot"
  std::string filter, language, nan, resize;
};

// {"name", "source": {"format", "path", "filter"?, "language"?, "nan"?, "resize"?}}. The server
// says which options a format takes; this only carries them.
nlohmann::json DatasetImportBody(const std::string& name, const std::string& path,
                                 const DatasetImportFlags& flags);

// What `embody datasets pull NAME REGISTRY/REPO:TAG` sends: {"name", "source": {"format": "oci",
// "registry": REGISTRY, "reference": "REPO:TAG"}}, split at the first '/'. The server checks
// both (a registry it was configured with, a strict reference).
nlohmann::json DatasetPullBody(const std::string& name, const std::string& image);

}  // namespace cli
