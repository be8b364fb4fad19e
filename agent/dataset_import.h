// Where an import job's dataset goes on this node, and how it gets there.
//
// Under the dataset root (the same shared path on every node and the server):
//
//   <root>/tenant-<tid>/                 root's, 0755: made by the agent
//   <root>/tenant-<tid>/.import-<id>/    the job uid's, 0700: embody-data writes <staging>/dataset
//   <root>/tenant-<tid>/dataset-<id>/    the published version: root's, read-only for jobs
//
// The job writes only inside its staging directory. When embody-data exits 0 the agent (after
// every process of the job's uid is gone) checks that the output holds only directories and
// regular files, gives it to root, makes it read-only for everyone else, and renames it to
// dataset-<id>; on failure or a kill the staging directory is removed. So a version directory
// exists only whole, and a later job of the same uid can change nothing in it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/sandbox.h"
#include "common/status.h"

namespace agent {

struct ImportPaths {
  std::string tenant_dir;
  std::string staging_dir;
  std::string output_dir;  // <staging>/dataset: what embody-data creates
  std::string final_dir;
};

// The paths of the import job `spec` (kind import, import.dataset_id) of `tenant_id`.
// failed_precondition without a dataset root; invalid_argument for a spec without a dataset id.
common::Result<ImportPaths> ImportPathsFor(const std::string& root, int64_t tenant_id,
                                           const nlohmann::json& spec);

// Makes the tenant directory (root's, 0755) and a fresh staging directory for `owner` (or the
// agent's own uid when nullopt). already_exists when the version was published before.
common::Status PrepareImport(const ImportPaths& paths, const std::optional<JobCredentials>& owner);

// Seals and renames the output (see above). Call only once the job's processes are all gone.
common::Status PublishImport(const ImportPaths& paths);

// Removes the staging directory and what is in it.
void DiscardImport(const ImportPaths& paths);

}  // namespace agent
