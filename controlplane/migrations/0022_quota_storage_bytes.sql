-- The bytes a tenant's stored dataset versions (OCI images included) and checkpoints may hold
-- together (service/storage_quota.h); NULL: no limit. Uploads, imports and checkpoint uploads
-- past it are refused.
ALTER TABLE tenants ADD COLUMN quota_storage_bytes bigint
  CHECK (quota_storage_bytes >= 0);
