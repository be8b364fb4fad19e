-- Dataset uploads (docs/storage.md "Uploading a file"): a version created by POST /v1/datasets
-- with source.upload starts in state 'uploading', with no job, while its bytes arrive in chunks
-- into the server's own directory; received_bytes is how many it holds. Its commit checks size and
-- SHA-256 and moves it to 'importing' with an import job, as a path import starts. An upload
-- untouched for --dataset-upload-ttl-s is swept to 'failed'.
ALTER TABLE datasets DROP CONSTRAINT datasets_state_check;
ALTER TABLE datasets ADD CONSTRAINT datasets_state_check
  CHECK (state IN ('uploading', 'importing', 'ready', 'failed', 'deleted'));
ALTER TABLE datasets ADD COLUMN received_bytes bigint NOT NULL DEFAULT 0
  CHECK (received_bytes >= 0);
-- The per-tenant count of uploads in progress and the sweep of abandoned ones.
CREATE INDEX datasets_uploading_idx ON datasets (tenant_id, updated_at) WHERE state = 'uploading';
