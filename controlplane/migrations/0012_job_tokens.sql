-- Multi-node jobs (docs/multinode.md): each placement carries its attempt's job token, made by the
-- scheduler. The head agent gets it in the launch command (its ranks' EMBODY_JOB_TOKEN, and the
-- credential `embody-agent rsh` presents); the other nodes of the placement get only its SHA-256,
-- to check that credential. Kept as sent, because a launch is repeated until acknowledged; cleared
-- when the placement is released.
ALTER TABLE job_allocations ADD COLUMN job_token text NOT NULL DEFAULT '';
