-- Pipelines (docs/pipelines.md): a tenant's DAG of steps, each a job submitted by the server's
-- driver as the pipeline's owner token. The validated spec is kept as submitted; the state of
-- every step (its attempts' job ids, a gate's compared values) is one jsonb array written whole
-- by the driver under the row's lock. `key` is the secret part of the idempotency key of each
-- step's job, so a submission retried after a crash finds its job instead of making another.
CREATE TABLE pipelines (
  id           bigserial PRIMARY KEY,
  tenant_id    bigint NOT NULL REFERENCES tenants(id),
  token_id     bigint NOT NULL REFERENCES tokens(id),
  name         text NOT NULL,
  state        text NOT NULL DEFAULT 'running'
               CHECK (state IN ('running', 'cancelling', 'succeeded', 'failed', 'cancelled')),
  reason       text NOT NULL DEFAULT '',
  spec         jsonb NOT NULL,
  steps        jsonb NOT NULL DEFAULT '[]',
  key          text NOT NULL,
  created_at   timestamptz NOT NULL,
  updated_at   timestamptz NOT NULL,
  finished_at  timestamptz
);
CREATE INDEX pipelines_tenant_idx ON pipelines (tenant_id, id DESC);
CREATE INDEX pipelines_active_idx ON pipelines (id) WHERE state IN ('running', 'cancelling');
