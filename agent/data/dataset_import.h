// Where an import job's dataset goes on this node, how it gets there, and who may read it.
//
// Under the dataset root (the same shared path on every node and the server):
//
//   <root>/                              0755 (or 0711) root: never writable by group or others
//   <root>/tenant-<tid>/                 root:<tenant gid> 0750: only that tenant's jobs enter
//   <root>/tenant-<tid>/.import-<id>/    the job uid's, 0700: embody-data writes <staging>/dataset
//   <root>/tenant-<tid>/dataset-<id>/    the published version: root's, read-only (0755 / 0444)
//
// The tenant gid is the supplementary group every process of that tenant's jobs runs with
// (agent/sandbox/sandbox.h), so a job reads its own tenant's versions and gets EACCES on another
// tenant's directory, whatever path it names; the group has no write bit, so no job adds or
// renames anything there. An agent that runs jobs as itself gives no group (it isolates nothing).
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

#include "agent/sandbox/sandbox.h"
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

// Makes the tenant directory, or fixes one an earlier agent made (0755, readable by anyone):
// with `group`, owned by the agent's uid and `group`, mode 0750. Without one (jobs run as the
// agent) a new directory is the agent's, 0750, and an existing one is left as it is. Refuses a
// symbolic link in its place.
common::Status PrepareTenantDir(const std::string& tenant_dir, std::optional<gid_t> group);

// At the agent's start, with `sandbox.switch_uid`: makes the root when missing, takes write away
// from group and others on it (a job could otherwise make a tenant's directory first), and gives
// every tenant-<tid> directory in it its tenant's group (PrepareTenantDir); the directory of a
// tenant past the range is locked to the agent alone (0700). No-op for an empty root; without
// the uid switch only makes the root. Tries every directory and returns the first failure.
common::Status PrepareDatasetRoot(const std::string& root, const SandboxOptions& sandbox);

// Makes the tenant directory (PrepareTenantDir with `owner`'s group) and a fresh staging
// directory for `owner` (or the agent's own uid when nullopt). already_exists when the version
// was published before.
common::Status PrepareImport(const ImportPaths& paths, const std::optional<JobCredentials>& owner);

// Seals and renames the output (see above). Call only once the job's processes are all gone.
common::Status PublishImport(const ImportPaths& paths);

// Removes the staging directory and what is in it.
void DiscardImport(const ImportPaths& paths);

}  // namespace agent
