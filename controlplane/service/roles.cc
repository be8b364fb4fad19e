#include "controlplane/service/roles.h"

namespace controlplane::service {

int PersonRank(const std::string& role) {
  if (role == kClusterAdmin) return 4;
  if (role == kTenantAdmin) return 3;
  if (role == kMember) return 2;
  if (role == kViewer) return 1;
  return 0;
}

Status RequireAtLeast(const Principal& p, const char* min_role, const std::string& what) {
  if (PersonRank(p.role) >= PersonRank(min_role) && PersonRank(p.role) > 0) return Status::Ok();
  return Status(common::Code::kPermissionDenied,
                what + " needs role " + min_role + " or above; this token is " + p.role);
}

bool MayMonitor(const Principal& p) { return p.IsClusterAdmin() || p.role == kMonitoringRole; }

Status CheckGrant(const Principal& p, const std::string& role, int64_t tenant_id) {
  if (p.IsClusterAdmin()) {
    if (PersonRank(role) > 0 || role == kJoinRole || role == kMonitoringRole) return Status::Ok();
    return common::InvalidArgument(
        "role must be one of cluster-admin, tenant-admin, member, viewer, agent, monitoring",
        "role");
  }
  EMBODY_RETURN_IF_ERROR(RequireAtLeast(p, kTenantAdmin, "managing tokens"));
  if (tenant_id != p.tenant_id) {
    return Status(common::Code::kPermissionDenied, "tokens of another tenant", "tenant_id");
  }
  if (PersonRank(role) == 0) {
    return Status(common::Code::kPermissionDenied,
                  "a tenant-admin grants only tenant-admin, member or viewer", "role");
  }
  if (PersonRank(role) > PersonRank(p.role)) {
    return Status(common::Code::kPermissionDenied,
                  "cannot grant role " + role + " above your own (" + p.role + ")", "role");
  }
  return Status::Ok();
}

}  // namespace controlplane::service
