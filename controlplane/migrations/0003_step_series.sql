-- Metrics history (GET /v1/jobs/{id}/metrics): a step event carries its step in a column, so a
-- job's series are read and bucketed by step through an index, and the thinning policy of
-- controlplane/service/metrics_history.h can keep a job's latest step event only until the next
-- one arrives (provisional) without rescanning its history.
ALTER TABLE job_events ADD COLUMN step bigint;
ALTER TABLE job_events ADD COLUMN provisional boolean NOT NULL DEFAULT false;
UPDATE job_events SET step = floor((data->>'step')::numeric)::bigint
  WHERE type = 'step' AND jsonb_typeof(data->'step') = 'number'
    AND (data->>'step')::numeric BETWEEN -9e18 AND 9e18;
CREATE INDEX job_events_job_step_idx ON job_events (job_id, step) WHERE type = 'step';
CREATE INDEX job_events_provisional_idx ON job_events (job_id) WHERE provisional;
