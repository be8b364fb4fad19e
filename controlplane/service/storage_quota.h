// A tenant's storage quota (quota.storage_bytes): the bytes of its dataset versions (every
// format, OCI images included; an upload in progress by its declared size) and of its
// checkpoints (uploading and ready), together. Nothing is kept as a running total: the bytes are
// summed from the rows every time, so deleting a version or a checkpoint frees its bytes at once
// and nothing can drift.
//
// Checked where bytes are admitted, inside the caller's unit of work and under the tenant's row
// lock (GetTenant for_update), so two admissions of one tenant cannot both take the last room:
//   starting a dataset upload          its declared size            429 resource_exhausted
//   queueing a path import             nothing yet (its size is     429 when the tenant is
//                                      known once the import ran)   already past its quota
//   the manifest an import reports     its bytes                    the version fails
//   starting a checkpoint upload       its declared size            429 (as the server-wide
//                                                                   --checkpoint-quota-gib: both
//                                                                   apply, the tighter refuses)
#pragma once

#include <cstdint>
#include <string>

#include "controlplane/service/store.h"

namespace controlplane::service {

// The largest quota.storage_bytes a cluster-admin may set: 1 PiB.
inline constexpr int64_t kMaxStorageQuotaBytes = int64_t{1} << 50;

// What counts against quota.storage_bytes: DatasetStore::BytesForTenant (every version but
// `except_dataset_id`, 0: none left out) plus CheckpointIndex::BytesForTenant.
Result<int64_t> StorageUsed(UnitOfWork& uow, int64_t tenant_id, int64_t except_dataset_id = 0);

// resource_exhausted (on `field`, "" for none), naming the bytes held, the bytes asked and the
// quota, when `asked` more bytes do not fit `t`'s quota.storage_bytes; ok when it has none. The
// caller read `t` with for_update in `uow`. `except_dataset_id`: a version already counted whose
// bytes `asked` stands for (an import reporting its manifest).
Status CheckStorageQuota(UnitOfWork& uow, const TenantRecord& t, int64_t asked,
                         const std::string& field, int64_t except_dataset_id = 0);

}  // namespace controlplane::service
