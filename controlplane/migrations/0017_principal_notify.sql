-- Every transaction that updates or deletes tokens or tenants notifies channel embody_principals
-- when it commits, whoever writes it (a server replica, or an operator in psql). Each replica
-- listens on it and empties its cache of authenticated principals (controlplane/db/
-- principal_listener.h): a revoked or expired token, a renamed or removed tenant, is never
-- answered from an older copy. One notification per statement; PostgreSQL folds identical ones
-- of a transaction into one.
CREATE FUNCTION embody_notify_principals() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('embody_principals', '');
  RETURN NULL;
END;
$$;

CREATE TRIGGER tokens_notify_principals AFTER UPDATE OR DELETE OR TRUNCATE ON tokens
  FOR EACH STATEMENT EXECUTE FUNCTION embody_notify_principals();
CREATE TRIGGER tenants_notify_principals AFTER UPDATE OR DELETE OR TRUNCATE ON tenants
  FOR EACH STATEMENT EXECUTE FUNCTION embody_notify_principals();
