#include "controlplane/service/auth.h"

#include "common/crypto.h"

namespace controlplane::service {

Result<Principal> Authenticate(Database& db, const std::string& header) {
  const std::string kPrefix = "Bearer ";
  if (header.size() <= kPrefix.size() || header.compare(0, kPrefix.size(), kPrefix) != 0) {
    return Status(common::Code::kUnauthenticated, "missing bearer token");
  }
  const std::string token = header.substr(kPrefix.size());
  EMBODY_ASSIGN_OR_RETURN(uow, db.Begin());
  EMBODY_ASSIGN_OR_RETURN(p, uow->tenants().FindToken(common::Sha256Hex(token)));
  if (!p) return Status(common::Code::kUnauthenticated, "unknown token");
  return *p;
}

Result<BootstrapResult> Bootstrap(Database& db) {
  EMBODY_ASSIGN_OR_RETURN(uow, db.Begin());
  EMBODY_RETURN_IF_ERROR(uow->tenants().LockBootstrap());
  EMBODY_ASSIGN_OR_RETURN(n, uow->tenants().CountTenants());
  if (n > 0) return BootstrapResult{};
  BootstrapResult r{true, "default", common::RandomToken(), common::RandomToken()};
  EMBODY_ASSIGN_OR_RETURN(tenant_id, uow->tenants().CreateTenant(r.tenant));
  EMBODY_RETURN_IF_ERROR(uow->tenants().CreateToken(common::Sha256Hex(r.admin_token), tenant_id,
                                                    "cluster-admin", "bootstrap admin"));
  EMBODY_RETURN_IF_ERROR(uow->tenants().CreateToken(common::Sha256Hex(r.agent_token), tenant_id,
                                                    "agent", "bootstrap agent"));
  EMBODY_RETURN_IF_ERROR(uow->Commit());
  return r;
}

}  // namespace controlplane::service
