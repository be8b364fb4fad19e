#include "controlplane/service/storage_quota.h"

#include "controlplane/service/checkpoint_index.h"
#include "controlplane/service/dataset_store.h"

namespace controlplane::service {

Result<int64_t> StorageUsed(UnitOfWork& uow, int64_t tenant_id, int64_t except_dataset_id) {
  EMBODY_ASSIGN_OR_RETURN(datasets, uow.datasets().BytesForTenant(tenant_id, except_dataset_id));
  EMBODY_ASSIGN_OR_RETURN(checkpoints, uow.checkpoints().BytesForTenant(tenant_id));
  return datasets + checkpoints;
}

Status CheckStorageQuota(UnitOfWork& uow, const TenantRecord& t, int64_t asked,
                         const std::string& field, int64_t except_dataset_id) {
  if (!t.quota.storage_bytes) return Status::Ok();
  const int64_t quota = *t.quota.storage_bytes;
  EMBODY_ASSIGN_OR_RETURN(used, StorageUsed(uow, t.id, except_dataset_id));
  // Compared without adding, so no sum of large figures can wrap.
  if (used <= quota && asked <= quota - used) return Status::Ok();
  return Status(common::Code::kResourceExhausted,
                "tenant " + t.name + " holds " + std::to_string(used) +
                    " bytes of datasets, images and checkpoints; " + std::to_string(asked) +
                    " more exceed its quota.storage_bytes of " + std::to_string(quota),
                field);
}

}  // namespace controlplane::service
