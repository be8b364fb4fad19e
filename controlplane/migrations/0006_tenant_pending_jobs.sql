-- Each tenant's PENDING jobs as a number, kept by the job store as jobs enter and leave PENDING
-- (controlplane/db/job_store.cc): a submission checks the pending-jobs quota by reading one row
-- instead of counting the tenant's whole queue, which grows with it.
CREATE TABLE tenant_pending_jobs (
  tenant_id  bigint PRIMARY KEY REFERENCES tenants(id),
  jobs       bigint NOT NULL
);
INSERT INTO tenant_pending_jobs (tenant_id, jobs)
  SELECT tenant_id, count(*) FROM jobs WHERE state = 'PENDING' GROUP BY tenant_id;
