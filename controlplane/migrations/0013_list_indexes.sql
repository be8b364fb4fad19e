-- Keyset pages of jobs filtered by state (GET /v1/jobs?state=...), for one tenant or for all,
-- read in index order: `WHERE state = $s [AND tenant_id = $t] AND id < $cursor ORDER BY id DESC
-- LIMIT n` stops after n rows however many jobs the table holds. They replace the indexes on
-- (state) and (tenant_id, state), which are their prefixes.
CREATE INDEX jobs_state_id_idx ON jobs (state, id DESC);
CREATE INDEX jobs_tenant_state_id_idx ON jobs (tenant_id, state, id DESC);
DROP INDEX IF EXISTS jobs_state_idx;
DROP INDEX IF EXISTS jobs_tenant_state_idx;
