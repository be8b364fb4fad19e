// A dataset version as the API shows it (POST/GET/DELETE /v1/datasets..., the upload's commit),
// with its manifest and progress (GET /v1/datasets/{id}), the datasets listing, and the answer to
// one upload chunk; schemas Dataset, DatasetDetail and DatasetList of docs/api/openapi.yaml and
// the PUT /v1/datasets/{id}/upload reply. What a client writes (DatasetImport) is parsed by the
// server's own rules (api/dataset_ref.h, controlplane/service/datasets_service.h), not here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace api::v1 {

struct Dataset {
  int64_t id = 0;
  int64_t tenant_id = 0;
  std::string tenant;
  std::string name;
  int version = 0;
  std::string state;  // uploading | importing | ready | failed | deleted
  // The DatasetSource as stored (with registry_url for a pull); kept as the document it is,
  // since its fields are the import request's (api::ImportSource reads them on the server).
  nlohmann::json source = nlohmann::json::object();
  int64_t episodes = 0;
  int64_t frames = 0;
  int64_t bytes = 0;
  std::string path;               // the version's directory under the dataset root
  std::optional<int64_t> job_id;  // the import job; nullopt: none yet (null on the wire)
  std::string error;              // why the import failed; "" otherwise
  int64_t received_bytes = 0;     // an upload's bytes the server holds
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
  // DELETE only: whether the server removed the version's directory (absent elsewhere).
  std::optional<bool> directory_removed;
  bool operator==(const Dataset&) const = default;
};

// A Dataset with what GET /v1/datasets/{id} adds, written flat beside its fields.
struct DatasetDetail {
  Dataset dataset;
  nlohmann::json manifest;         // the dataset.json document; null until the import reported
  std::optional<double> progress;  // the import's, 0..1; nullopt: not known (null on the wire)
  bool operator==(const DatasetDetail&) const = default;
};

struct DatasetList {
  std::vector<Dataset> datasets;
  std::optional<std::string> next_cursor;  // nullopt: the last page (null on the wire)
  bool operator==(const DatasetList&) const = default;
};

// The answer to one chunk of an upload: the bytes the server now holds.
struct DatasetUploadProgress {
  int64_t id = 0;
  int64_t received_bytes = 0;
  bool operator==(const DatasetUploadProgress&) const = default;
};

nlohmann::json ToJson(const Dataset& d);
nlohmann::json ToJson(const DatasetDetail& d);
nlohmann::json ToJson(const DatasetList& l);
nlohmann::json ToJson(const DatasetUploadProgress& p);
// Each refuses a field of the wrong type or a missing required one, naming it.
common::Result<Dataset> ParseDataset(const nlohmann::json& j);
common::Result<DatasetDetail> ParseDatasetDetail(const nlohmann::json& j);
common::Result<DatasetList> ParseDatasetList(const nlohmann::json& j);
common::Result<DatasetUploadProgress> ParseDatasetUploadProgress(const nlohmann::json& j);

}  // namespace api::v1
