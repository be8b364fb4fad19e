// Datasets as tenants see them (docs/storage.md): import a file into a new version, list, read
// (manifest and statistics), delete.
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

#include <nlohmann/json.hpp>

#include "api/job_spec.h"
#include "controlplane/service/jobs_service.h"
#include "controlplane/service/store.h"

namespace controlplane::service {

class DatasetsService {
 public:
  // `root`: the dataset root (--dataset-root); "" : imports are refused (failed_precondition).
  // `wake` nudges the scheduler after an import was queued.
  DatasetsService(Database& db, std::string root, Clock now, std::function<void()> wake)
      : db_(db), root_(std::move(root)), now_(std::move(now)), wake_(std::move(wake)) {}

  // {"name", "source": {"format"?, "path", "filter"?, "language"?}} -> the new dataset (201).
  Result<nlohmann::json> Import(const Principal& p, const std::string& body);
  // {"datasets": [...], "next_cursor"}; `name` "" : every name; `tenant_id` > 0 narrows a
  // cluster-admin's list to one tenant.
  Result<nlohmann::json> List(const Principal& p, int limit, const std::string& cursor,
                              const std::string& name, int64_t tenant_id);
  // The dataset with its manifest and the import's latest progress.
  Result<nlohmann::json> Get(const Principal& p, int64_t id);
  // Marks the version deleted and removes its directory when the server can reach the root.
  // failed_precondition while its import runs or a job that has not ended reads it.
  Result<nlohmann::json> Delete(const Principal& p, int64_t id);

  // <root>/tenant-<tenant_id>/dataset-<id>
  static std::string DirectoryOf(const std::string& root, int64_t tenant_id, int64_t id);

 private:
  Database& db_;
  const std::string root_;
  Clock now_;
  std::function<void()> wake_;
};

}  // namespace controlplane::service
