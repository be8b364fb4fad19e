-- A finished job keeps the record of where it ran: allocations are released, not deleted, when
-- the job ends. Only unreleased allocations hold slots.
ALTER TABLE job_allocations ADD COLUMN released boolean NOT NULL DEFAULT false;
CREATE INDEX job_allocations_live_idx ON job_allocations (node_id) WHERE NOT released;
