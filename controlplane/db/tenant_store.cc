// Tenants and their bearer tokens (stored as SHA-256 digests only).
#include "controlplane/db/stores.h"

namespace controlplane::db {

using common::Result;
using common::Status;

Status PgTenantStore::LockBootstrap() {
  auto r = tx_.Exec("SELECT pg_advisory_xact_lock(7361002)");
  return r.ok() ? Status::Ok() : r.status();
}

Result<int64_t> PgTenantStore::CountTenants() {
  auto r = tx_.Exec("SELECT count(*) AS n FROM tenants");
  if (!r.ok()) return r.status();
  return r->Int(0, "n");
}

Result<int64_t> PgTenantStore::CreateTenant(const std::string& name) {
  auto r = tx_.Exec("INSERT INTO tenants (name) VALUES ($1) RETURNING id", {P(name)});
  if (!r.ok()) return r.status();
  return r->Int(0, "id");
}

Status PgTenantStore::CreateToken(const std::string& sha256_hex, int64_t tenant_id,
                                  const std::string& role, const std::string& name) {
  auto r = tx_.Exec("INSERT INTO tokens (hash, tenant_id, role, name) VALUES ($1, $2, $3, $4)",
                    {P(sha256_hex), P(tenant_id), P(role), P(name)});
  return r.ok() ? Status::Ok() : r.status();
}

Result<std::optional<service::Principal>> PgTenantStore::FindToken(const std::string& sha256_hex) {
  auto r = tx_.Exec("SELECT k.tenant_id, t.name AS tenant, k.role FROM tokens k"
                    " JOIN tenants t ON t.id = k.tenant_id WHERE k.hash = $1",
                    {P(sha256_hex)});
  if (!r.ok()) return r.status();
  if (r->empty()) return std::optional<service::Principal>();
  return std::optional<service::Principal>(
      service::Principal{r->Int(0, "tenant_id"), r->Str(0, "tenant"), r->Str(0, "role")});
}

}  // namespace controlplane::db
