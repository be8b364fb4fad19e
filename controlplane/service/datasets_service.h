// Datasets as tenants see them (docs/storage.md): import a file into a new version, list, read
// (manifest and statistics), delete. A file the nodes cannot read is uploaded first
// (dataset_uploads.h): its version waits in state uploading until the upload is committed.
//
// An import is a job: POST /v1/datasets creates the dataset record (state importing) and a job of
// kind "import" of the same tenant in one transaction, scheduled like any other job; the agent
// that runs it writes the version's directory <root>/tenant-<tid>/dataset-<id> under the dataset
// root every node mounts, and dataset_lifecycle.h moves the record along with the job.
//
// Every call is scoped to the caller's tenant unless the caller is a cluster-admin; another
// tenant's dataset answers 404 like a missing one. Members and above import; viewers and above
// read; a tenant-admin deletes any of its tenant's datasets, a member those its own token
// created.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/image_reference.h"
#include "api/job_spec.h"
#include "api/v1/dataset.h"
#include "controlplane/service/blob_files.h"
#include "controlplane/service/dataset_uploads.h"
#include "controlplane/service/jobs_service.h"
#include "controlplane/service/store.h"

namespace controlplane::service {

// Inside `uow`: admits and inserts the import job of version `d` (of d.tenant_id) reading
// `source`, and moves `d` to importing with its job and directory under `root`. `p` is who asked
// (the job's token and the event's actor). The caller commits, then wakes the scheduler.
Status QueueImportJob(UnitOfWork& uow, const Principal& p, DatasetRecord& d,
                      const api::ImportSource& source, const std::string& root, int64_t now_ms);

class DatasetsService {
 public:
  // `root`: the dataset root (--dataset-root); "" : imports are refused (failed_precondition).
  // `wake` nudges the scheduler after an import was queued. `uploads` nullptr: this server keeps
  // no uploads (--dataset-upload-max-gib 0), so an upload source is refused. `registries`: the
  // only ones an image is pulled from (--image-registry); none: pulls are refused.
  DatasetsService(Database& db, std::string root, Clock now, std::function<void()> wake,
                  DatasetUploads* uploads = nullptr,
                  std::vector<api::ImageRegistry> registries = {})
      : db_(db),
        root_(std::move(root)),
        now_(std::move(now)),
        wake_(std::move(wake)),
        uploads_(uploads),
        registries_(std::move(registries)) {}

  // {"name", "source": {"format"?, "path" | "upload" | "registry" + "reference", "filter"?,
  // "language"?}} -> the new dataset (201): importing for a path or a pull, uploading for an
  // upload. A pull names a configured registry (by name or host; invalid_argument on
  // source.registry otherwise) and is stored with that registry's name and URL, so the version
  // says where it came from; its manifest gives the digest pulled.
  Result<api::v1::Dataset> Import(const Principal& p, const std::string& body);
  // Newest first; `name` "" : every name; `tenant_id` > 0 narrows a cluster-admin's list to one
  // tenant.
  Result<api::v1::DatasetList> List(const Principal& p, int limit, const std::string& cursor,
                                    const std::string& name, int64_t tenant_id);
  // The dataset with its manifest and the import's latest progress.
  Result<api::v1::DatasetDetail> Get(const Principal& p, int64_t id);
  // Marks the version deleted and removes its directory when the server can reach the root,
  // and its upload's bytes (directory_removed says whether the directory went). failed_precondition
  // while its import runs or a job that has not ended reads it.
  Result<api::v1::Dataset> Delete(const Principal& p, int64_t id);

  // One file of a ready version, for download: dataset.json or a shard its manifest lists (any
  // other name is not_found). The server reads it from the version's directory under its own
  // dataset root; where that root is not mounted on the server (datasets live on the nodes), or
  // the server has none, failed_precondition says so and names the way that works: embody-data
  // on a node that mounts the root.
  struct DatasetFile {
    int64_t tenant_id = 0;
    std::shared_ptr<BlobReader> reader;
  };
  Result<DatasetFile> OpenFile(const Principal& p, int64_t id, const std::string& name);

  // <root>/tenant-<tenant_id>/dataset-<id>
  static std::string DirectoryOf(const std::string& root, int64_t tenant_id, int64_t id);

 private:
  Database& db_;
  const std::string root_;
  Clock now_;
  std::function<void()> wake_;
  DatasetUploads* uploads_;
  const std::vector<api::ImageRegistry> registries_;
};

}  // namespace controlplane::service
