-- Results of kind "eval" jobs (docs/eval.md): one row per evaluated task, written from the job's
-- `eval` event, read by GET /v1/jobs/{id}/evaluation. The job's tenant scopes every read (through
-- jobs.tenant_id, as job_events are). A second result for the same task (an eval job restarted
-- after a node loss) replaces the first.
CREATE TABLE job_evaluations (
  job_id           bigint NOT NULL REFERENCES jobs(id),
  task             text NOT NULL,
  episodes         integer NOT NULL CHECK (episodes > 0),
  successes        integer NOT NULL CHECK (successes >= 0 AND successes <= episodes),
  success_rate     double precision NOT NULL CHECK (success_rate >= 0 AND success_rate <= 1),
  mean_return      double precision NOT NULL,
  mean_length      double precision NOT NULL,
  checkpoint_step  bigint NOT NULL,
  policy           text NOT NULL,
  fp8              boolean NOT NULL,
  time             timestamptz NOT NULL,
  PRIMARY KEY (job_id, task)
);
