-- A command job reads every dataset version its spec's "datasets" names (docs/byo.md), a train
-- job still the one of engine.data.dataset: a job's bindings are keyed by (job, dataset) instead
-- of by job alone. A version stays undeletable while any job bound to it has not ended.
ALTER TABLE job_datasets DROP CONSTRAINT job_datasets_pkey;
ALTER TABLE job_datasets ADD PRIMARY KEY (job_id, dataset_id);
