-- The highest priority a tenant's members and tenant-admins may give a job; NULL: the server's
-- --default-max-priority.
ALTER TABLE tenants ADD COLUMN quota_max_priority integer;
