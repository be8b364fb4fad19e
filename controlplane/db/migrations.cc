#include "controlplane/db/migrations.h"

#include "common/log.h"

namespace controlplane::db {

using common::Status;

namespace {
constexpr char kCreateTable[] =
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    " version integer PRIMARY KEY, name text NOT NULL,"
    " applied_at timestamptz NOT NULL DEFAULT now())";
// Any constant works; it only has to differ from the scheduler's leader lock.
constexpr char kLock[] = "SELECT pg_advisory_xact_lock(7361001)";
// A replica waits here while another migrates, and a migration may rewrite a large table: the
// session's statement and lock timeouts (PgOptions) are for requests, not for this.
constexpr char kNoTimeouts[] = "SET LOCAL statement_timeout = 0; SET LOCAL lock_timeout = 0";
constexpr char kSelectApplied[] = "SELECT version FROM schema_migrations";
constexpr char kInsertApplied[] = "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)";
}  // namespace

common::Result<int> ApplyMigrations(PgPool& pool, const std::vector<Migration>& migrations) {
  auto tx = PgTx::Begin(pool);
  if (!tx.ok()) return tx.status();
  EMBODY_RETURN_IF_ERROR((*tx)->ExecScript(kNoTimeouts));
  for (const char* sql : {kLock, kCreateTable}) {
    auto r = (*tx)->Exec(sql);
    if (!r.ok()) return r.status();
  }
  auto applied = (*tx)->Exec(kSelectApplied);
  if (!applied.ok()) return applied.status();
  int newest = 0;
  for (size_t i = 0; i < applied->size(); ++i) {
    newest = std::max<int>(newest, static_cast<int>(applied->Int(i, "version")));
  }
  // A database migrated by a newer binary: this one does not know its tables, and writing to them
  // could corrupt what the newer server wrote. Upgrades go forward only (docs/operations.md).
  const int known = migrations.empty() ? 0 : migrations.back().version;
  if (newest > known) {
    return common::FailedPrecondition(
        "the database's schema is version " + std::to_string(newest) +
        ", newer than this binary's " + std::to_string(known) +
        ": run the embody-server that migrated it (or a newer one), or restore a backup made "
        "before the upgrade");
  }
  int count = 0;
  // Migrations apply all together or not at all, so a half-migrated database never exists.
  for (const Migration& m : migrations) {
    if (m.version <= newest) continue;
    Status st = (*tx)->ExecScript(m.sql);
    if (!st.ok()) return common::Internal("migration " + std::string(m.name) + ": " + st.message());
    auto r = (*tx)->Exec(kInsertApplied, {P(m.version), P(m.name)});
    if (!r.ok()) return r.status();
    common::LogInfo("applied migration", {{"name", m.name}});
    ++count;
  }
  EMBODY_RETURN_IF_ERROR((*tx)->Commit());
  return count;
}

common::Result<int> CurrentSchemaVersion(PgPool& pool, std::optional<int> wait_ms) {
  auto lease = pool.Acquire(wait_ms);
  if (!lease.ok()) return lease.status();
  auto exists = Exec(lease->get(), "SELECT to_regclass('schema_migrations') IS NOT NULL AS e");
  if (!exists.ok()) return exists.status();
  if (!exists->Bool(0, "e")) return 0;
  auto r = Exec(lease->get(), "SELECT coalesce(max(version), 0) AS v FROM schema_migrations");
  if (!r.ok()) return r.status();
  return static_cast<int>(r->Int(0, "v"));
}

}  // namespace controlplane::db
