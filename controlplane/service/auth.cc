#include "controlplane/service/auth.h"

#include "common/crypto.h"
#include "controlplane/service/principal_cache.h"
#include "controlplane/service/roles.h"

namespace controlplane::service {

namespace {
constexpr size_t kMaxTokenChars = 256;
}  // namespace

Result<Principal> Authenticate(Database& db, const std::string& header, int64_t now_ms) {
  return Authenticate(db, nullptr, header, now_ms);
}

Result<Principal> Authenticate(Database& db, PrincipalCache* cache, const std::string& header,
                               int64_t now_ms) {
  const std::string kPrefix = "Bearer ";
  if (header.size() <= kPrefix.size() || header.compare(0, kPrefix.size(), kPrefix) != 0) {
    return Status(common::Code::kUnauthenticated, "missing bearer token");
  }
  const size_t token_chars = header.size() - kPrefix.size();
  if (token_chars > kMaxTokenChars) return Status(common::Code::kUnauthenticated, "unknown token");
  const std::string digest = common::Sha256Hex(header.substr(kPrefix.size()));
  uint64_t epoch = 0;
  std::optional<TokenMatch> m;
  if (cache) m = cache->Get(digest, &epoch);
  if (!m) {
    EMBODY_ASSIGN_OR_RETURN(uow, db.Begin());
    EMBODY_ASSIGN_OR_RETURN(found, uow->tenants().FindToken(digest));
    m = std::move(found);
    if (!m || !common::ConstantTimeEquals(m->sha256_hex, digest)) {
      return Status(common::Code::kUnauthenticated, "unknown token");
    }
    // Only live tokens are kept; expiry is checked below on every call, hit or not.
    if (cache && !m->revoked_ms) cache->Put(digest, *m, epoch);
  }
  if (m->revoked_ms) return Status(common::Code::kUnauthenticated, "token revoked");
  if (m->expires_ms && *m->expires_ms <= now_ms) {
    return Status(common::Code::kUnauthenticated, "token expired");
  }
  return m->principal;
}

Result<BootstrapResult> Bootstrap(Database& db, int64_t now_ms) {
  EMBODY_ASSIGN_OR_RETURN(uow, db.Begin());
  EMBODY_RETURN_IF_ERROR(uow->tenants().LockBootstrap());
  EMBODY_ASSIGN_OR_RETURN(n, uow->tenants().CountTenants());
  if (n > 0) return BootstrapResult{};
  BootstrapResult r{true, "default", common::RandomToken(), common::RandomToken()};
  TenantRecord t;
  t.name = r.tenant;
  EMBODY_ASSIGN_OR_RETURN(tenant_id, uow->tenants().CreateTenant(t, now_ms));
  auto token = [&](const std::string& secret, const char* role, const char* name) {
    NewToken t;
    t.sha256_hex = common::Sha256Hex(secret);
    t.tenant_id = tenant_id;
    t.role = role;
    t.name = name;
    t.now_ms = now_ms;
    return t;
  };
  const NewToken admin = token(r.admin_token, kClusterAdmin, "bootstrap admin");
  const NewToken join = token(r.agent_token, kJoinRole, "cluster join");
  EMBODY_ASSIGN_OR_RETURN(admin_id, uow->tenants().CreateToken(admin));
  EMBODY_ASSIGN_OR_RETURN(join_id, uow->tenants().CreateToken(join));
  (void)admin_id;
  (void)join_id;
  EMBODY_RETURN_IF_ERROR(uow->Commit());
  return r;
}

}  // namespace controlplane::service
