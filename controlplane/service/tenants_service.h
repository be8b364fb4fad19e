// Tenants as operators manage them: create, list, read, and PATCH with a version (If-Match), each
// with its quota, fair-share weight and what it holds now.
//
// Cluster-admins see and change every tenant; everyone else sees only their own tenant (another
// tenant answers 404, like one that does not exist) and changes none.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "api/v1/tenant.h"
#include "controlplane/service/jobs_service.h"
#include "controlplane/service/store.h"

namespace controlplane::service {

class TenantsService {
 public:
  TenantsService(Database& db, Clock now) : db_(db), now_(std::move(now)) {}

  // {"name", "weight"?, "quota"?} -> the tenant created.
  Result<api::v1::Tenant> Create(const Principal& p, const std::string& body);
  Result<api::v1::TenantList> List(const Principal& p);
  Result<api::v1::Tenant> Get(const Principal& p, int64_t id);
  // `if_match`: the version the client read ("" or "*": unconditional); a stale one is 412.
  Result<api::v1::Tenant> Patch(const Principal& p, int64_t id, const std::string& body,
                                const std::string& if_match);
  // Slot-seconds the tenant's jobs held per UTC day, submitting token and slot type (GPU-hours
  // where nodes have GPUs), for days in [from, to] ("YYYY-MM-DD"; "" : the 30 days to today).
  Result<api::v1::TenantUsage> Usage(const Principal& p, int64_t id, const std::string& from,
                                     const std::string& to);

 private:
  Database& db_;
  Clock now_;
};

// Parses the writable fields of a tenant from a create or patch body into `t`; unknown fields,
// wrong types and out-of-range values are invalid_argument naming the field.
Status ParseTenantFields(const nlohmann::json& body, bool require_name, TenantRecord* t);

// What the API shows of tenant `t` holding `usage`.
api::v1::Tenant TenantView(const TenantRecord& t, const TenantUsageNow& usage);

}  // namespace controlplane::service
