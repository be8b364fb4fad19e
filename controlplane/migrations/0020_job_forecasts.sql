-- Forecasts made for submitted jobs (docs/contracts.md, "Forecasts"): the predicted start, run
-- time and end as forecast at submission, and, once the job started and ended, how far off they
-- were (actual minus predicted, seconds). `open` rows are still to be compared with their job's
-- start or end; the partial index keeps finding them cheap however many closed rows pile up.
CREATE TABLE job_forecasts (
  job_id                 bigint PRIMARY KEY REFERENCES jobs(id),
  made_at                timestamptz NOT NULL,
  predicted_start        timestamptz,
  predicted_run_seconds  double precision,
  predicted_end          timestamptz,
  detail                 jsonb NOT NULL DEFAULT '{}',
  start_error_seconds    double precision,
  end_error_seconds      double precision,
  open                   boolean NOT NULL DEFAULT true
);
CREATE INDEX job_forecasts_open_idx ON job_forecasts (job_id) WHERE open;
