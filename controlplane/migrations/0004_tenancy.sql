-- Tenancy: tenants get a fair-share weight, quotas and a version (PATCH with If-Match); tokens
-- expire, are revoked, and a node's credential is bound to its node; every mutating call is
-- audited; a submission remembers its token and, for Idempotency-Key, a digest of its body.
ALTER TABLE tenants ADD COLUMN weight double precision NOT NULL DEFAULT 1;
ALTER TABLE tenants ADD COLUMN quota_slots integer;           -- NULL: no limit
ALTER TABLE tenants ADD COLUMN quota_running_jobs integer;
ALTER TABLE tenants ADD COLUMN quota_pending_jobs integer;
ALTER TABLE tenants ADD COLUMN quota_nodes_per_job integer;
ALTER TABLE tenants ADD COLUMN version bigint NOT NULL DEFAULT 1;
ALTER TABLE tenants ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now();

-- Roles: cluster-admin, tenant-admin, member, viewer (people); agent (the cluster join token:
-- register only); node (one node's credential, node_id set).
ALTER TABLE tokens ADD COLUMN expires_at timestamptz;
ALTER TABLE tokens ADD COLUMN revoked_at timestamptz;
ALTER TABLE tokens ADD COLUMN node_id bigint REFERENCES nodes(id);
ALTER TABLE tokens ADD COLUMN created_by bigint REFERENCES tokens(id);
CREATE INDEX tokens_tenant_idx ON tokens (tenant_id, id);
CREATE UNIQUE INDEX tokens_live_node_idx ON tokens (node_id)
  WHERE node_id IS NOT NULL AND revoked_at IS NULL;

ALTER TABLE nodes ADD COLUMN draining boolean NOT NULL DEFAULT false;
ALTER TABLE nodes ADD COLUMN isolation jsonb NOT NULL DEFAULT '{}';

ALTER TABLE jobs ADD COLUMN token_id bigint REFERENCES tokens(id);
ALTER TABLE jobs ADD COLUMN request_sha256 text;
CREATE INDEX jobs_tenant_state_idx ON jobs (tenant_id, state);

CREATE TABLE audit_log (
  id                bigserial PRIMARY KEY,
  time              timestamptz NOT NULL,
  token_id          bigint,
  actor             text NOT NULL,     -- the token's name, or "anonymous"
  role              text NOT NULL,
  tenant_id         bigint,            -- the caller's tenant
  target_tenant_id  bigint,            -- the tenant the target belongs to, when known
  method            text NOT NULL,
  route             text NOT NULL,
  path              text NOT NULL,
  target            text NOT NULL,
  status            integer NOT NULL,
  outcome           text NOT NULL,     -- "ok" or the error code
  request_id        text NOT NULL
);
CREATE INDEX audit_log_tenant_idx ON audit_log (tenant_id, id DESC);
CREATE INDEX audit_log_target_tenant_idx ON audit_log (target_tenant_id, id DESC);
