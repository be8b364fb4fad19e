-- Datasets (docs/storage.md): one row per version of a tenant's named dataset. A version is
-- imported by a job of kind "import" (job_id) into `path` under the server's dataset root; the
-- manifest is the dataset.json document the import reported, and episodes/frames/bytes are
-- copied out of it for listing. Rows are never removed: a deleted version keeps its number, so
-- versions only count up per (tenant, name).
CREATE TABLE datasets (
  id          bigserial PRIMARY KEY,
  tenant_id   bigint NOT NULL REFERENCES tenants(id),
  token_id    bigint NOT NULL DEFAULT 0,  -- the token that created it (0: not known)
  name        text NOT NULL,
  version     integer NOT NULL CHECK (version >= 1),
  state       text NOT NULL CHECK (state IN ('importing', 'ready', 'failed', 'deleted')),
  source      jsonb NOT NULL,
  manifest    jsonb,
  episodes    bigint NOT NULL DEFAULT 0,
  frames      bigint NOT NULL DEFAULT 0,
  bytes       bigint NOT NULL DEFAULT 0,
  path        text NOT NULL DEFAULT '',
  job_id      bigint REFERENCES jobs(id),
  error       text NOT NULL DEFAULT '',
  created_at  timestamptz NOT NULL,
  updated_at  timestamptz NOT NULL,
  UNIQUE (tenant_id, name, version)
);
CREATE INDEX datasets_job ON datasets (job_id);

-- Which dataset version a training job reads (engine.data.dataset "dataset:NAME[@VERSION]",
-- resolved at submit): the launch gives the engine that version's directory, and a version in
-- use by a job that has not ended cannot be deleted.
CREATE TABLE job_datasets (
  job_id      bigint PRIMARY KEY REFERENCES jobs(id),
  dataset_id  bigint NOT NULL REFERENCES datasets(id)
);
CREATE INDEX job_datasets_dataset ON job_datasets (dataset_id);
