-- Initial schema: tenants and their tokens, nodes, jobs with allocations, events, logs and
-- checkpoints. Times are timestamptz; every tenant-owned row carries tenant_id.
CREATE TABLE tenants (
  id          bigserial PRIMARY KEY,
  name        text NOT NULL UNIQUE,
  created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE tokens (
  id          bigserial PRIMARY KEY,
  hash        text NOT NULL UNIQUE,  -- lower-case hex SHA-256 of the token
  tenant_id   bigint NOT NULL REFERENCES tenants(id),
  role        text NOT NULL,
  name        text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE nodes (
  id              bigserial PRIMARY KEY,
  name            text NOT NULL UNIQUE,
  address         text NOT NULL,
  agent_url       text NOT NULL DEFAULT '',
  cpu_slots       integer NOT NULL,
  memory_bytes    bigint NOT NULL DEFAULT 0,
  gpus            jsonb NOT NULL DEFAULT '[]',
  last_heartbeat  timestamptz NOT NULL,
  state           text NOT NULL
);

CREATE TABLE jobs (
  id               bigserial PRIMARY KEY,
  tenant_id        bigint NOT NULL REFERENCES tenants(id),
  name             text NOT NULL,
  kind             text NOT NULL,
  state            text NOT NULL,
  reason           text NOT NULL DEFAULT '',
  priority         integer NOT NULL,
  spec             jsonb NOT NULL,
  attempt          integer NOT NULL DEFAULT 0,
  exit_code        integer,
  idempotency_key  text,
  created_at       timestamptz NOT NULL,
  updated_at       timestamptz NOT NULL,
  started_at       timestamptz,
  finished_at      timestamptz,
  UNIQUE (tenant_id, idempotency_key)
);
CREATE INDEX jobs_tenant_id_idx ON jobs (tenant_id, id DESC);
CREATE INDEX jobs_state_idx ON jobs (state);

CREATE TABLE job_allocations (
  job_id     bigint NOT NULL REFERENCES jobs(id),
  node_id    bigint NOT NULL REFERENCES nodes(id),
  ranks      integer NOT NULL,
  slots      integer NOT NULL,
  slot_type  text NOT NULL,
  is_head    boolean NOT NULL,
  launched   boolean NOT NULL DEFAULT false,
  PRIMARY KEY (job_id, node_id)
);
CREATE INDEX job_allocations_node_idx ON job_allocations (node_id);

CREATE TABLE job_events (
  id      bigserial PRIMARY KEY,
  job_id  bigint NOT NULL REFERENCES jobs(id),
  time    timestamptz NOT NULL,
  type    text NOT NULL,
  data    jsonb NOT NULL
);
CREATE INDEX job_events_job_idx ON job_events (job_id, id);
CREATE INDEX job_events_job_type_idx ON job_events (job_id, type, id);

CREATE TABLE job_logs (
  job_id  bigint NOT NULL REFERENCES jobs(id),
  rank    integer NOT NULL,
  path    text NOT NULL,
  bytes   bigint NOT NULL,
  PRIMARY KEY (job_id, rank)
);

CREATE TABLE checkpoints (
  id          bigserial PRIMARY KEY,
  job_id      bigint NOT NULL REFERENCES jobs(id),
  step        bigint NOT NULL,
  path        text NOT NULL,
  bytes       bigint NOT NULL,
  created_at  timestamptz NOT NULL
);
CREATE INDEX checkpoints_job_idx ON checkpoints (job_id, step DESC);
