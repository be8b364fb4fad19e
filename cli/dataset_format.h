// Terminal rendering of datasets (GET /v1/datasets, GET /v1/datasets/{id}), and the body of
// POST /v1/datasets. Missing or null values print as "-".
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace cli {

// ID NAME VERSION STATE EPISODES FRAMES SIZE JOB CREATED
std::string DatasetsTable(const nlohmann::json& reply);
// "key: value" lines: identity, state (with progress while importing, the error when failed),
// counts, where it came from and where it is, and the statistics' keys with their shapes.
std::string DatasetDetail(const nlohmann::json& dataset);

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
