// Schema migrations: numbered SQL files from controlplane/migrations/, embedded into the binary
// at build time and applied in order at start, each inside one transaction, recorded in the
// schema_migrations table. Re-applying is a no-op; replicas starting together serialise on an
// advisory lock.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "controlplane/db/pg.h"

namespace controlplane::db {

struct Migration {
  int version;
  const char* name;
  const char* sql;
};

// Generated from migrations/*.sql, sorted by version.
const std::vector<Migration>& EmbeddedMigrations();

// Applies every migration newer than the database's; returns how many were applied. A database
// at a newer version than the newest of `migrations` is refused (failed_precondition), unchanged.
common::Result<int> ApplyMigrations(PgPool& pool, const std::vector<Migration>& migrations);
// The newest version recorded in schema_migrations (0 when none or the table is missing).
// `wait_ms`: the longest wait for a pooled connection (default: the pool's), so a readiness
// probe answers promptly when every connection is busy.
common::Result<int> CurrentSchemaVersion(PgPool& pool, std::optional<int> wait_ms = std::nullopt);

}  // namespace controlplane::db
