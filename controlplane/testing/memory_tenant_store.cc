// The twin's tenants, tokens and audit log, mirroring controlplane/db/tenant_store.cc: unique
// tenant names and token digests, at most one live credential per node, references checked, and
// a zero id stored as NULL (it matches no filter).
#include "controlplane/testing/memory_tables.h"

namespace controlplane::testing {

using common::Result;
using common::Status;
using service::TenantRecord;
using service::TokenRecord;

Status MemoryTenantStore::LockBootstrap() {
  return tx_.Usable();  // units are serialised: the lock is already held
}

Result<int64_t> MemoryTenantStore::CountTenants() {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  return static_cast<int64_t>(tx_.tables.tenants.get().size());
}

Status MemoryTenantStore::CheckTenantName(const std::string& name, int64_t except_id) {
  for (const auto& [id, t] : tx_.tables.tenants.get()) {
    if (id != except_id && t.name == name) {
      return tx_.Fail(
          Status(common::Code::kAlreadyExists, "tenant \"" + name + "\" exists", "name"));
    }
  }
  return Status::Ok();
}

Result<int64_t> MemoryTenantStore::CreateTenant(const TenantRecord& t, int64_t now_ms) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  EMBODY_RETURN_IF_ERROR(tx_.Text(t.name));
  const int64_t id = ++tx_.seq.tenants;
  EMBODY_RETURN_IF_ERROR(CheckTenantName(t.name, 0));
  TenantRecord row;
  row.id = id;
  row.name = t.name;
  row.weight = t.weight;
  row.quota = t.quota;
  row.version = 1;
  row.created_ms = now_ms;
  row.updated_ms = now_ms;
  tx_.tables.tenants.mut().emplace(id, row);
  return id;
}

Result<std::optional<TenantRecord>> MemoryTenantStore::GetTenant(int64_t id, bool /*for_update*/) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  const auto& all = tx_.tables.tenants.get();
  auto it = all.find(id);
  if (it == all.end()) return std::optional<TenantRecord>();
  return std::optional<TenantRecord>(it->second);
}

Result<std::vector<TenantRecord>> MemoryTenantStore::ListTenants(std::optional<int64_t> only) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  std::vector<TenantRecord> out;
  for (const auto& [id, t] : tx_.tables.tenants.get()) {
    if (!only || id == *only) out.push_back(t);
  }
  return out;
}

Status MemoryTenantStore::UpdateTenant(const TenantRecord& t, int64_t now_ms) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  EMBODY_RETURN_IF_ERROR(tx_.Text(t.name));
  if (tx_.tables.tenants.get().count(t.id) == 0) return Status::Ok();
  EMBODY_RETURN_IF_ERROR(CheckTenantName(t.name, t.id));
  TenantRecord& row = tx_.tables.tenants.mut().at(t.id);
  row.name = t.name;
  row.weight = t.weight;
  row.quota = t.quota;
  row.version += 1;
  row.updated_ms = now_ms;
  return Status::Ok();
}

Result<service::TenantUsageNow> MemoryTenantStore::UsageNow(int64_t tenant_id) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  service::TenantUsageNow u;
  const auto& jobs = tx_.tables.jobs.get();
  for (const auto& [key, row] : tx_.tables.allocations.get()) {
    auto j = jobs.find(key.first);
    if (!row.released && j != jobs.end() && j->second.job.tenant_id == tenant_id) {
      u.slots_in_use += row.a.slots;
    }
  }
  for (const auto& [id, row] : jobs) {
    if (row.job.tenant_id != tenant_id) continue;
    switch (row.job.state) {
      case api::JobState::kScheduled:
      case api::JobState::kRunning:
      case api::JobState::kCancelling:
      case api::JobState::kRestarting:
        ++u.running_jobs;
        break;
      case api::JobState::kPending:
        ++u.pending_jobs;
        break;
      default:
        break;
    }
  }
  return u;
}

// --- tokens ------------------------------------------------------------------------------------

TokenRecord MemoryTenantStore::Read(const TokenRow& row) const {
  TokenRecord t = row.token;
  t.tenant = TenantName(tx_.tables, t.tenant_id);
  return t;
}

Result<int64_t> MemoryTenantStore::CreateToken(const service::NewToken& t) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  for (const std::string* s : {&t.sha256_hex, &t.role, &t.name}) {
    EMBODY_RETURN_IF_ERROR(tx_.Text(*s));
  }
  const int64_t id = ++tx_.seq.tokens;
  const auto& tokens = tx_.tables.tokens.get();
  for (const auto& [other_id, row] : tokens) {
    if (row.hash == t.sha256_hex) {
      return tx_.Fail(Status(common::Code::kAlreadyExists,
                             "memory database: duplicate key value violates tokens_hash_key"));
    }
    // tokens_live_node_idx
    if (t.node_id != 0 && row.token.node_id == t.node_id && !row.token.revoked_ms) {
      return tx_.Fail(Status(common::Code::kAlreadyExists,
                             "memory database: duplicate key value violates tokens_live_node_idx"));
    }
  }
  EMBODY_RETURN_IF_ERROR(
      tx_.Reference(tx_.tables.tenants.get().count(t.tenant_id) > 0, "tokens.tenant_id"));
  EMBODY_RETURN_IF_ERROR(tx_.Reference(
      t.node_id == 0 || tx_.tables.nodes.get().count(t.node_id) > 0, "tokens.node_id"));
  EMBODY_RETURN_IF_ERROR(
      tx_.Reference(t.created_by == 0 || tokens.count(t.created_by) > 0, "tokens.created_by"));
  TokenRow row;
  row.hash = t.sha256_hex;
  row.token.id = id;
  row.token.tenant_id = t.tenant_id;
  row.token.role = t.role;
  row.token.name = t.name;
  row.token.node_id = t.node_id;
  row.token.created_by = t.created_by;
  row.token.created_ms = t.now_ms;
  row.token.expires_ms = t.expires_ms;
  tx_.tables.tokens.mut().emplace(id, std::move(row));
  return id;
}

Result<std::vector<TokenRecord>> MemoryTenantStore::ListTokens(std::optional<int64_t> tenant_id) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  std::vector<TokenRecord> out;
  for (const auto& [id, row] : tx_.tables.tokens.get()) {
    if (!tenant_id || row.token.tenant_id == *tenant_id) out.push_back(Read(row));
  }
  return out;
}

Result<std::optional<TokenRecord>> MemoryTenantStore::GetToken(int64_t id,
                                                               std::optional<int64_t> tenant_id) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  const auto& all = tx_.tables.tokens.get();
  auto it = all.find(id);
  if (it == all.end() || (tenant_id && it->second.token.tenant_id != *tenant_id)) {
    return std::optional<TokenRecord>();
  }
  return std::optional<TokenRecord>(Read(it->second));
}

Status MemoryTenantStore::RevokeToken(int64_t id, int64_t now_ms) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  auto it = tx_.tables.tokens.get().find(id);
  if (it == tx_.tables.tokens.get().end() || it->second.token.revoked_ms) return Status::Ok();
  tx_.tables.tokens.mut().at(id).token.revoked_ms = now_ms;
  return Status::Ok();
}

Result<bool> MemoryTenantStore::HasLiveNodeToken(int64_t node_id, int64_t now_ms) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  for (const auto& [id, row] : tx_.tables.tokens.get()) {
    const TokenRecord& t = row.token;
    if (node_id != 0 && t.node_id == node_id && !t.revoked_ms &&
        (!t.expires_ms || *t.expires_ms > now_ms)) {
      return true;
    }
  }
  return false;
}

Status MemoryTenantStore::RevokeNodeTokens(int64_t node_id, int64_t now_ms) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  if (node_id == 0) return Status::Ok();
  std::vector<int64_t> live;
  for (const auto& [id, row] : tx_.tables.tokens.get()) {
    if (row.token.node_id == node_id && !row.token.revoked_ms) live.push_back(id);
  }
  for (int64_t id : live) tx_.tables.tokens.mut().at(id).token.revoked_ms = now_ms;
  return Status::Ok();
}

Result<std::optional<service::TokenMatch>> MemoryTenantStore::FindToken(
    const std::string& sha256_hex) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  EMBODY_RETURN_IF_ERROR(tx_.Text(sha256_hex));
  for (const auto& [id, row] : tx_.tables.tokens.get()) {
    if (row.hash != sha256_hex) continue;
    const TokenRecord t = Read(row);
    service::TokenMatch m;
    m.principal.token_id = t.id;
    m.principal.token_name = t.name;
    m.principal.tenant_id = t.tenant_id;
    m.principal.tenant = t.tenant;
    m.principal.role = t.role;
    m.principal.node_id = t.node_id;
    m.sha256_hex = row.hash;
    m.expires_ms = t.expires_ms;
    m.revoked_ms = t.revoked_ms;
    return std::optional<service::TokenMatch>(std::move(m));
  }
  return std::optional<service::TokenMatch>();
}

// --- audit -------------------------------------------------------------------------------------

Result<int64_t> MemoryAuditStore::Append(const service::AuditRecord& r) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  for (const std::string* s :
       {&r.actor, &r.role, &r.method, &r.route, &r.path, &r.target, &r.outcome, &r.request_id}) {
    EMBODY_RETURN_IF_ERROR(tx_.Text(*s));
  }
  service::AuditRecord row = r;
  row.id = ++tx_.seq.audit;
  row.tenant.clear();  // filled on reads
  const int64_t id = row.id;
  tx_.tables.audit.mut().emplace(id, std::move(row));
  return id;
}

Status MemoryAuditStore::Amend(int64_t id, const service::AuditRecord& r) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  for (const std::string* s : {&r.outcome, &r.target}) EMBODY_RETURN_IF_ERROR(tx_.Text(*s));
  if (tx_.tables.audit.get().count(id) == 0) return Status::Ok();  // UPDATE of no row
  service::AuditRecord& row = tx_.tables.audit.mut().at(id);
  row.status = r.status;
  row.outcome = r.outcome;
  row.target = r.target;
  row.target_tenant_id = r.target_tenant_id;
  return Status::Ok();
}

Result<int64_t> MemoryAuditStore::DeleteBefore(int64_t before_ms, int limit) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  auto& rows = tx_.tables.audit.mut();
  int64_t n = 0;
  for (auto it = rows.begin(); it != rows.end() && n < limit;) {
    if (it->second.time_ms < before_ms) {
      it = rows.erase(it);
      ++n;
    } else {
      ++it;
    }
  }
  return n;
}

Result<std::vector<service::AuditRecord>> MemoryAuditStore::List(const service::AuditQuery& q) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  if (q.limit < 0) return tx_.Fail(common::Internal("memory database: LIMIT must not be negative"));
  std::vector<service::AuditRecord> out;
  const auto& all = tx_.tables.audit.get();
  for (auto it = all.rbegin(); it != all.rend() && static_cast<int>(out.size()) < q.limit; ++it) {
    const service::AuditRecord& a = it->second;
    if (q.before_id && a.id >= *q.before_id) continue;
    // A zero tenant is NULL in the table: it equals nothing.
    if (q.tenant_id &&
        !((a.tenant_id != 0 && a.tenant_id == *q.tenant_id && a.role != "cluster-admin") ||
          (a.target_tenant_id != 0 && a.target_tenant_id == *q.tenant_id))) {
      continue;
    }
    service::AuditRecord r = a;
    r.tenant = TenantName(tx_.tables, a.tenant_id);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace controlplane::testing
