// Dataset uploads (docs/storage.md "Uploading a file"): a file sent to the server in chunks,
// then imported by a job exactly as a path import is.
//
//   POST /v1/datasets {"name", "source": {"upload": {"bytes", "sha256"}, ...}}
//        -> a new version in state "uploading", no job yet (DatasetsService::Import calls Start)
//   PUT  /v1/datasets/{id}/upload?offset=K  one chunk; appended only at received_bytes
//   POST /v1/datasets/{id}/upload/commit    size and SHA-256 checked; then, in one transaction,
//                                           the version goes to "importing" with its import job
//   GET  /v1/datasets/{id}/upload           the bytes, for the agent of the node the import job
//                                           was placed on (node credential), nobody else
//
// Chunks: a chunk at received_bytes is appended. One that starts before it (a retry after a lost
// answer) is compared with the bytes held: equal bytes answer the size held (and any tail past it
// is appended), different ones are refused, as is a chunk that leaves a gap. A chunk may carry
// X-Content-Sha256, checked before anything is stored.
//
// Who may: members and up create; the member who created the upload, a tenant-admin of its
// tenant or a cluster-admin send chunks and commit (anyone else of the tenant: permission_denied;
// another tenant: not_found, as a missing version). Bounds: bytes per upload, uploads in progress
// per tenant, chunk size, and how long an upload may sit untouched before the sweep fails it; and
// the tenant's quota.storage_bytes (storage_quota.h), which counts an upload by its declared size
// from its start.
//
// The blob goes when the version leaves uploading/importing (Sweep removes files whose version is
// in neither state: the import ended, any outcome; deleted; swept) and at once on Delete. A commit
// whose SHA-256 differs keeps the upload as it is (the client deletes it or lets the sweep go).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "api/dataset_ref.h"
#include "api/v1/dataset.h"
#include "controlplane/service/dataset_store.h"
#include "controlplane/service/dataset_upload_files.h"
#include "controlplane/service/jobs_service.h"
#include "controlplane/service/store.h"

namespace controlplane::service {

struct DatasetUploadLimits {
  int64_t max_bytes = int64_t{64} << 30;      // one upload (--dataset-upload-max-gib)
  int max_per_tenant = 4;                     // uploads in progress (--dataset-uploads-per-tenant)
  int64_t max_chunk_bytes = int64_t{8} << 20;  // the HTTP edge's body limit
  int64_t ttl_ms = 3600 * 1000;               // untouched this long: swept (--dataset-upload-ttl-s)
};

struct DatasetUploadDownload {
  int64_t bytes = 0;
  std::string sha256;
  std::shared_ptr<BlobReader> reader;
};

class DatasetUploads {
 public:
  // `root`: the dataset root the import job publishes under (DatasetsService's).
  DatasetUploads(Database& db, const DatasetUploadFiles& files, DatasetUploadLimits limits,
                 std::string root, Clock now, std::function<void()> wake)
      : db_(db),
        files_(files),
        limits_(limits),
        root_(std::move(root)),
        now_(std::move(now)),
        wake_(std::move(wake)) {}

  const DatasetUploadFiles& files() const { return files_; }

  // A new version of `name` in state uploading; the caller checked the role and the body.
  Result<api::v1::Dataset> Start(const Principal& p, const std::string& name,
                                 const api::ImportSource& source);
  // -> the bytes now held. `chunk_sha256` "" : not given.
  Result<api::v1::DatasetUploadProgress> PutChunk(const Principal& p, int64_t id, int64_t offset,
                                                  const std::string& chunk_sha256,
                                                  const std::string& data);
  // -> the dataset, now importing (also when a commit whose answer was lost is repeated).
  Result<api::v1::Dataset> Commit(const Principal& p, int64_t id);
  // For a node whose agent runs the version's import job.
  Result<DatasetUploadDownload> Open(const Principal& p, int64_t id);

  // Fails uploads untouched for ttl_ms ("upload abandoned") and removes every upload file whose
  // version is no longer uploading or importing. Returns how many uploads it failed.
  Result<int> Sweep(int limit = 100);

 private:
  // The uploading version `id`, locked, if `p` may write to it.
  Result<DatasetRecord> Writable(UnitOfWork& uow, const Principal& p, int64_t id);

  Database& db_;
  const DatasetUploadFiles& files_;
  const DatasetUploadLimits limits_;
  const std::string root_;
  Clock now_;
  std::function<void()> wake_;
};

}  // namespace controlplane::service
