// How a dataset version follows the jobs around it, inside the caller's unit of work:
//  - its import job reports {"type":"dataset","manifest":{...}} (or {"type":"dataset","error":
//    "..."}) through its agent; the manifest is checked for shape and size, and its bytes
//    against the tenant's quota.storage_bytes (storage_quota.h), and stored with the counts
//    copied out of it (a refused one is not stored and fails the version);
//  - when the import job ends (transitions.cc calls FinishDatasetImport): SUCCEEDED with a
//    manifest -> ready; anything else -> failed, with the import's own error or the job's reason;
//  - a training job naming "dataset:NAME[@VERSION]" is bound to the ready version at submit
//    (ResolveDataset) and launched with that version's directory as "dir:PATH"
//    (LaunchSpecFor); the stored spec keeps the name, for display;
//  - a command job's "datasets" are bound the same way, each to its version
//    (ResolveCommandDatasets), and launched as an object from NAME@VERSION to each directory;
//  - so is a command job's "environment": {"image": NAME[@VERSION]}, a version of format "oci"
//    (an OCI image layout, storage/oci_layout.h), launched as {"name": "NAME@VERSION", "path":
//    its directory, "digest": its manifest's digest}, which the agents cache and run
//    (agent/images/image_cache.h).
#pragma once

#include <optional>

#include <nlohmann/json.hpp>

#include "api/job_spec.h"
#include "api/v1/dataset.h"
#include "controlplane/service/dataset_store.h"
#include "controlplane/service/store.h"

namespace controlplane::service {

// The largest manifest kept in PostgreSQL (an agent event carries at most 64 KiB anyway) and
// the longest import error.
inline constexpr size_t kMaxManifestBytes = 60 * 1024;
inline constexpr size_t kMaxDatasetErrorBytes = 4096;

// A "dataset" event of job `job_id`; ignored unless the job imports a dataset that is still
// importing. A malformed manifest fails the dataset (it is never stored).
Status RecordDatasetEvent(UnitOfWork& uow, int64_t job_id, const nlohmann::json& data,
                          int64_t now_ms);

// `job` has just reached a terminal state.
Status FinishDatasetImport(UnitOfWork& uow, const JobRecord& job, int64_t now_ms);

// The dataset version a spec reads, for a spec naming "dataset:..." (nullopt for the built-in
// task). unprocessable (field engine.data.dataset) when the tenant has no such version or it is
// not ready; invalid_argument, naming the dataset and the spec's field, when the job's model or
// data options do not fit the version's keys (api/dataset_fit.h: action width, cameras, state).
Result<std::optional<DatasetRecord>> ResolveDataset(UnitOfWork& uow, int64_t tenant_id,
                                                    const api::JobSpec& spec);

// The dataset versions a command job's "environment.image" and "datasets" name, the image
// first, then in the spec's order, a version named twice (by its number and as the newest) once.
// unprocessable on environment.image or datasets[i] when the tenant has no such version, it is
// not ready, or it is an image where a dataset is wanted or the other way round. Empty for other
// kinds.
Result<std::vector<DatasetRecord>> ResolveCommandDatasets(UnitOfWork& uow, int64_t tenant_id,
                                                          const api::JobSpec& spec);

// A command job's launch spec: its "datasets" list replaced by the object the ranks get as
// EMBODY_DATASETS, from "NAME@VERSION" to the directory of each version bound to the job, and
// its environment.image by the bound image version (see above).
Result<nlohmann::json> WithBoundDatasets(UnitOfWork& uow, int64_t job_id, nlohmann::json spec);

// The spec a launch carries: the stored one, with a bound dataset replaced by "dir:PATH" (kind
// train) or the bound versions' directories (kind command, WithBoundDatasets).
Result<nlohmann::json> LaunchSpecFor(UnitOfWork& uow, const JobRecord& job);

// Checks what the server relies on in a dataset.json document: an object with stats.episodes
// and stats.frames (non-negative integers), keys[] of {name, dtype, shape} and shards[] whose
// bytes add up. Returns the bytes.
Result<int64_t> CheckManifest(const nlohmann::json& manifest);

// The version as the API shows it (api/v1/dataset.h).
api::v1::Dataset DatasetView(const DatasetRecord& d);

// Whether the version is an OCI image (source format "oci").
bool IsImage(const DatasetRecord& d);

}  // namespace controlplane::service
