-- History retention (controlplane/service/history_retention.h) finds finished jobs by when they
-- finished, oldest first.
CREATE INDEX jobs_finished_at_idx ON jobs (finished_at) WHERE finished_at IS NOT NULL;
