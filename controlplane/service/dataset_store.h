// Where datasets are kept (tables datasets and job_datasets, migrations 0008_datasets.sql and
// 0009_dataset_uploads.sql): one
// record per version of a tenant's named dataset, and which versions a job reads
// (0019_job_datasets_many.sql). Used
// through a UnitOfWork, like every store (store.h); datasets_service.h holds the rules.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace controlplane::service {

using common::Result;
using common::Status;

inline constexpr const char* kDatasetUploading = "uploading";
inline constexpr const char* kDatasetImporting = "importing";
inline constexpr const char* kDatasetReady = "ready";
inline constexpr const char* kDatasetFailed = "failed";
inline constexpr const char* kDatasetDeleted = "deleted";

struct DatasetRecord {
  int64_t id = 0;
  int64_t tenant_id = 0;
  std::string tenant;  // filled on reads
  int64_t token_id = 0;
  std::string name;
  int version = 0;
  std::string state;  // uploading | importing | ready | failed | deleted
  nlohmann::json source = nlohmann::json::object();
  nlohmann::json manifest;  // null until the import reported it
  int64_t episodes = 0;
  int64_t frames = 0;
  int64_t bytes = 0;
  std::string path;  // the version's directory under the dataset root
  std::optional<int64_t> job_id;  // the import job
  std::string error;
  int64_t received_bytes = 0;  // an upload's bytes the server holds
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
};

struct DatasetQuery {
  std::optional<int64_t> tenant_id;  // nullopt: all tenants
  std::string name;                  // "": any name
  bool include_deleted = false;
  std::optional<int64_t> before_id;  // pagination cursor: ids strictly below
  int limit = 50;
};

class DatasetStore {
 public:
  virtual ~DatasetStore() = default;
  // Inserts `d` as the next version of (tenant, name), in state uploading when d.state says so,
  // importing otherwise, and returns it with id, version and state filled in. Callers serialise
  // creations per tenant (the tenant row lock).
  virtual Result<DatasetRecord> Insert(const DatasetRecord& d, int64_t now_ms) = 0;
  virtual Result<std::optional<DatasetRecord>> Get(int64_t id, std::optional<int64_t> tenant_id,
                                                   bool for_update) = 0;
  virtual Result<std::optional<DatasetRecord>> GetByJob(int64_t job_id, bool for_update) = 0;
  // The newest ready version of `name` in `tenant_id`, or that exact version when given (ready
  // or not: the caller says why it cannot be used).
  virtual Result<std::optional<DatasetRecord>> Find(int64_t tenant_id, const std::string& name,
                                                    std::optional<int> version) = 0;
  virtual Result<std::vector<DatasetRecord>> List(const DatasetQuery& q) = 0;  // newest first
  // Writes state, manifest, counts, path, job_id, error and received_bytes; updated_at = now.
  virtual Status Update(const DatasetRecord& d, int64_t now_ms) = 0;
  // Records that job `job_id` reads dataset `dataset_id` (already_exists when it is recorded).
  // A train job reads one version, a command job each its spec names.
  virtual Status BindJob(int64_t job_id, int64_t dataset_id) = 0;
  // The version a train job reads (the one bound to it).
  virtual Result<std::optional<DatasetRecord>> ForJob(int64_t job_id) = 0;
  // Every version bound to the job, by id.
  virtual Result<std::vector<DatasetRecord>> AllForJob(int64_t job_id) = 0;
  // Ids of jobs reading the dataset that have not ended.
  virtual Result<std::vector<int64_t>> LiveJobsReading(int64_t dataset_id) = 0;
  // The bytes the tenant's versions hold (what counts against quota.storage_bytes), over every
  // version but `except_id` (0: none left out): an uploading one its declared size
  // (source.upload.bytes); an importing one the greater of that and the bytes its manifest
  // reported; a ready one its bytes; failed and deleted ones nothing.
  virtual Result<int64_t> BytesForTenant(int64_t tenant_id, int64_t except_id) = 0;
  // How many versions of the tenant are uploading.
  virtual Result<int64_t> CountUploading(int64_t tenant_id) = 0;
  // Uploading versions last updated before `before_ms`, oldest first, at most `limit`.
  virtual Result<std::vector<DatasetRecord>> StaleUploads(int64_t before_ms, int limit) = 0;
};

}  // namespace controlplane::service
