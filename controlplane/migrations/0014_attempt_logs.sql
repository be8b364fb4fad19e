-- Each attempt of a job writes its own logs: a restarted attempt starts at offset 0 in files of its
-- own rather than after the bytes the attempt before it wrote. Rows from before are attempt 0.
ALTER TABLE job_logs ADD COLUMN attempt integer NOT NULL DEFAULT 0;
ALTER TABLE job_logs DROP CONSTRAINT job_logs_pkey;
ALTER TABLE job_logs ADD PRIMARY KEY (job_id, attempt, rank);
