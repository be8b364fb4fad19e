-- Checkpoints in the server's blob store (docs/checkpoints.md). The checkpoints table held until
-- now what jobs reported writing on their node's disk (state 'local', with its path); uploads
-- through POST /v1/jobs/{id}/checkpoints are rows of the same table in state 'uploading' until
-- their commit verified size and SHA-256, then 'ready'. Only 'ready' rows are listed or resumed
-- from. Every row carries its tenant.
ALTER TABLE checkpoints
  ADD COLUMN tenant_id       bigint REFERENCES tenants(id),
  ADD COLUMN state           text NOT NULL DEFAULT 'local'
                             CHECK (state IN ('local', 'uploading', 'ready')),
  ADD COLUMN sha256          text,
  ADD COLUMN metrics         jsonb NOT NULL DEFAULT '{}',
  ADD COLUMN received_bytes  bigint NOT NULL DEFAULT 0 CHECK (received_bytes >= 0),
  ADD COLUMN updated_at      timestamptz;
UPDATE checkpoints c SET tenant_id = j.tenant_id, updated_at = c.created_at
  FROM jobs j WHERE j.id = c.job_id;
ALTER TABLE checkpoints ALTER COLUMN tenant_id SET NOT NULL;
ALTER TABLE checkpoints ALTER COLUMN updated_at SET NOT NULL;
ALTER TABLE checkpoints ALTER COLUMN updated_at SET DEFAULT now();
-- Per-tenant quota sums and per-job counts read the blob rows only.
CREATE INDEX checkpoints_tenant_blob_idx ON checkpoints (tenant_id) WHERE state <> 'local';
CREATE INDEX checkpoints_job_state_idx ON checkpoints (job_id, state, step DESC);
-- The sweep of abandoned uploads.
CREATE INDEX checkpoints_uploading_idx ON checkpoints (updated_at) WHERE state = 'uploading';
