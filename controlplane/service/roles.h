// Roles and what each may do. People hold one of four ranked roles; machines hold two more.
//
//   cluster-admin  operators: every tenant, tenants and quotas, nodes, audit of all
//   tenant-admin   its tenant: jobs, tokens up to its own role, audit of its tenant
//   member         its tenant's jobs: submit, cancel, read
//   viewer         its tenant's jobs: read only
//   agent          the cluster join token: POST /v1/agents/register only
//   node           one node's credential: that node's register and heartbeat only
//   monitoring     Prometheus: service discovery and the server's /metrics, nothing else
//
// A role ranks above another when it may do everything the other may. Machine roles rank
// nowhere: they are not people and pass no person check.
#pragma once

#include <string>

#include "controlplane/service/store.h"

namespace controlplane::service {

inline constexpr const char* kClusterAdmin = "cluster-admin";
inline constexpr const char* kTenantAdmin = "tenant-admin";
inline constexpr const char* kMember = "member";
inline constexpr const char* kViewer = "viewer";
inline constexpr const char* kJoinRole = "agent";
inline constexpr const char* kNodeRole = "node";
inline constexpr const char* kMonitoringRole = "monitoring";

// Whether `p` may read what a monitoring system reads: the scrape targets and the series that
// name tenants (a cluster-admin, or a monitoring token).
bool MayMonitor(const Principal& p);

// 4 cluster-admin, 3 tenant-admin, 2 member, 1 viewer, 0 anything else.
int PersonRank(const std::string& role);

// permission_denied unless `p` is a person of at least `min_role`.
Status RequireAtLeast(const Principal& p, const char* min_role, const std::string& what);

// Whether `p` may create or revoke a token of `role` in `tenant_id`: cluster-admins any person
// role, the join role and the monitoring role anywhere; tenant-admins person roles up to their own, in their tenant.
Status CheckGrant(const Principal& p, const std::string& role, int64_t tenant_id);

}  // namespace controlplane::service
