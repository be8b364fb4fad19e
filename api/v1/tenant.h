// A tenant as the API shows it (GET/POST/PATCH /v1/tenants...), the tenants listing, and a
// tenant's usage report (GET /v1/tenants/{id}/usage); schemas Tenant, TenantList and TenantUsage
// of docs/api/openapi.yaml. What a client writes (TenantCreate, TenantPatch) is parsed by the
// server's own rules (controlplane/service/tenants_service.h), not here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace api::v1 {

// A tenant's quota; nullopt: no limit (null on the wire, every field always present).
struct TenantLimits {
  std::optional<int> slots;
  std::optional<int> running_jobs;
  std::optional<int> pending_jobs;
  std::optional<int> nodes_per_job;
  std::optional<int> max_priority;  // nullopt: the server's --default-max-priority
  std::optional<int64_t> storage_bytes;
  bool operator==(const TenantLimits&) const = default;
};

// What the tenant holds at the time of the answer.
struct TenantHolding {
  int64_t slots_in_use = 0;
  int64_t running_jobs = 0;  // SCHEDULED, RUNNING, CANCELLING, RESTARTING
  int64_t pending_jobs = 0;
  int64_t storage_bytes = 0;  // what counts against quota.storage_bytes
  bool operator==(const TenantHolding&) const = default;
};

struct Tenant {
  int64_t id = 0;
  std::string name;
  double weight = 1.0;  // fair-share weight, > 0
  TenantLimits quota;
  TenantHolding usage;
  int64_t version = 1;  // the ETag of a PATCH
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
  bool operator==(const Tenant&) const = default;
};

struct TenantList {
  std::vector<Tenant> tenants;
  bool operator==(const TenantList&) const = default;
};

// Slot-seconds of one UTC day, slot type and submitting token.
struct TenantUsageDay {
  std::string day;        // "YYYY-MM-DD"
  std::string slot_type;  // "cpu" or "gpu"
  std::optional<int64_t> token_id;       // nullopt: no token recorded (null on the wire)
  std::optional<std::string> token_name;  // nullopt: the token is gone or unnamed
  double slot_seconds = 0;
  bool operator==(const TenantUsageDay&) const = default;
};

struct TenantUsage {
  int64_t tenant_id = 0;
  std::string tenant;
  std::string from;  // "YYYY-MM-DD", inclusive
  std::string to;
  std::vector<TenantUsageDay> days;
  double total_slot_seconds = 0;
  double cpu_slot_hours = 0;  // slot_hours.cpu
  double gpu_slot_hours = 0;  // slot_hours.gpu: GPU-hours
  bool operator==(const TenantUsage&) const = default;
};

nlohmann::json ToJson(const Tenant& t);
nlohmann::json ToJson(const TenantList& l);
nlohmann::json ToJson(const TenantUsage& u);
// Each refuses a field of the wrong type or a missing required one, naming it.
common::Result<Tenant> ParseTenant(const nlohmann::json& j);
common::Result<TenantList> ParseTenantList(const nlohmann::json& j);
common::Result<TenantUsage> ParseTenantUsage(const nlohmann::json& j);

}  // namespace api::v1
