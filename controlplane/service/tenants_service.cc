#include "controlplane/service/tenants_service.h"

#include <cmath>
#include <map>
#include <regex>

#include "common/parse_int.h"
#include "common/time_util.h"
#include "controlplane/service/fair_share_store.h"
#include "controlplane/service/roles.h"
#include "controlplane/service/storage_quota.h"

namespace controlplane::service {

using nlohmann::json;

namespace {

constexpr int kMaxQuota = 1'000'000'000;
constexpr double kMaxWeight = 1e6;

bool ValidTenantName(const std::string& s) {
  static const std::regex re("[a-z0-9][a-z0-9._-]{0,62}");
  return std::regex_match(s, re);
}

Status ParseQuotaField(const json& q, const char* key, std::optional<int>* out) {
  if (!q.contains(key)) return Status::Ok();
  const json& v = q.at(key);
  const std::string field = std::string("quota.") + key;
  if (v.is_null()) {
    out->reset();
    return Status::Ok();
  }
  if (!v.is_number_integer()) return common::InvalidArgument("must be an integer or null", field);
  if (v.is_number_unsigned() ? v.get<uint64_t>() > static_cast<uint64_t>(kMaxQuota)
                             : (v.get<int64_t>() < 0 || v.get<int64_t>() > kMaxQuota)) {
    return common::InvalidArgument("must be between 0 and 1000000000, or null for no limit",
                                   field);
  }
  *out = static_cast<int>(v.get<int64_t>());
  return Status::Ok();
}

// quota.storage_bytes: bytes, up to kMaxStorageQuotaBytes, or null for no limit.
Status ParseStorageQuota(const json& q, std::optional<int64_t>* out) {
  if (!q.contains("storage_bytes")) return Status::Ok();
  const json& v = q.at("storage_bytes");
  if (v.is_null()) {
    out->reset();
    return Status::Ok();
  }
  const bool in_range =
      v.is_number_integer() &&
      (v.is_number_unsigned() ? v.get<uint64_t>() <= static_cast<uint64_t>(kMaxStorageQuotaBytes)
                              : v.get<int64_t>() >= 0 && v.get<int64_t>() <= kMaxStorageQuotaBytes);
  if (!in_range) {
    return common::InvalidArgument("must be an integer number of bytes between 0 and " +
                                       std::to_string(kMaxStorageQuotaBytes) +
                                       " (1 PiB), or null for no limit",
                                   "quota.storage_bytes");
  }
  *out = v.get<int64_t>();
  return Status::Ok();
}

// "YYYY-MM-DD" of a real date, else nullopt.
std::optional<std::string> ParseDay(const std::string& s) {
  if (s.size() != 10 || !common::ParseUtcTime(s + "T00:00:00Z")) return std::nullopt;
  return s;
}

// What the tenant holds now: jobs and slots from the tenant store, storage as its quota counts it.
Result<TenantUsageNow> UsageOf(UnitOfWork& uow, int64_t tenant_id) {
  EMBODY_ASSIGN_OR_RETURN(usage, uow.tenants().UsageNow(tenant_id));
  EMBODY_ASSIGN_OR_RETURN(storage, StorageUsed(uow, tenant_id));
  usage.storage_bytes = storage;
  return usage;
}

Result<json> ParseBody(const std::string& body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return common::InvalidArgument("request body is not valid JSON");
  if (!j.is_object()) return common::InvalidArgument("request body must be a JSON object");
  return j;
}

}  // namespace

Status ParseTenantFields(const json& body, bool require_name, TenantRecord* t) {
  for (auto it = body.begin(); it != body.end(); ++it) {
    if (it.key() != "name" && it.key() != "weight" && it.key() != "quota") {
      return common::InvalidArgument("unknown field", it.key());
    }
  }
  if (body.contains("name")) {
    if (!body["name"].is_string() || !ValidTenantName(body["name"].get<std::string>())) {
      return common::InvalidArgument(
          "must be 1-63 characters of a-z, 0-9, '.', '_' or '-', starting with a letter or digit",
          "name");
    }
    t->name = body["name"].get<std::string>();
  } else if (require_name) {
    return common::InvalidArgument("is required", "name");
  }
  if (body.contains("weight")) {
    const json& w = body["weight"];
    if (!w.is_number() || !std::isfinite(w.get<double>()) || w.get<double>() <= 0 ||
        w.get<double>() > kMaxWeight) {
      return common::InvalidArgument("must be a number > 0 and <= 1000000", "weight");
    }
    t->weight = w.get<double>();
  }
  if (body.contains("quota")) {
    const json& q = body["quota"];
    if (!q.is_object()) return common::InvalidArgument("must be an object", "quota");
    for (auto it = q.begin(); it != q.end(); ++it) {
      if (it.key() != "slots" && it.key() != "running_jobs" && it.key() != "pending_jobs" &&
          it.key() != "nodes_per_job" && it.key() != "max_priority" &&
          it.key() != "storage_bytes") {
        return common::InvalidArgument("unknown field", "quota." + it.key());
      }
    }
    EMBODY_RETURN_IF_ERROR(ParseQuotaField(q, "slots", &t->quota.slots));
    EMBODY_RETURN_IF_ERROR(ParseQuotaField(q, "running_jobs", &t->quota.running_jobs));
    EMBODY_RETURN_IF_ERROR(ParseQuotaField(q, "pending_jobs", &t->quota.pending_jobs));
    EMBODY_RETURN_IF_ERROR(ParseQuotaField(q, "nodes_per_job", &t->quota.nodes_per_job));
    EMBODY_RETURN_IF_ERROR(ParseQuotaField(q, "max_priority", &t->quota.max_priority));
    if (t->quota.max_priority && *t->quota.max_priority > 100) {
      return common::InvalidArgument("must be between 0 and 100, or null for the server's default",
                                     "quota.max_priority");
    }
    EMBODY_RETURN_IF_ERROR(ParseStorageQuota(q, &t->quota.storage_bytes));
  }
  return Status::Ok();
}

api::v1::Tenant TenantView(const TenantRecord& t, const TenantUsageNow& u) {
  api::v1::Tenant v;
  v.id = t.id;
  v.name = t.name;
  v.weight = t.weight;
  v.quota = {t.quota.slots,         t.quota.running_jobs, t.quota.pending_jobs,
             t.quota.nodes_per_job, t.quota.max_priority, t.quota.storage_bytes};
  v.usage = {u.slots_in_use, u.running_jobs, u.pending_jobs, u.storage_bytes};
  v.version = t.version;
  v.created_ms = t.created_ms;
  v.updated_ms = t.updated_ms;
  return v;
}

Result<api::v1::Tenant> TenantsService::Create(const Principal& p, const std::string& body) {
  if (!p.IsClusterAdmin()) {
    return Status(common::Code::kPermissionDenied, "creating tenants needs role cluster-admin");
  }
  EMBODY_ASSIGN_OR_RETURN(j, ParseBody(body));
  TenantRecord t;
  EMBODY_RETURN_IF_ERROR(ParseTenantFields(j, /*require_name=*/true, &t));
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(id, uow->tenants().CreateTenant(t, now_()));
  EMBODY_ASSIGN_OR_RETURN(created, uow->tenants().GetTenant(id, false));
  EMBODY_RETURN_IF_ERROR(uow->Commit());
  return TenantView(*created, TenantUsageNow{});
}

Result<api::v1::TenantList> TenantsService::List(const Principal& p) {
  EMBODY_RETURN_IF_ERROR(RequireAtLeast(p, kViewer, "reading tenants"));
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(all, uow->tenants().ListTenants(p.TenantScope()));
  api::v1::TenantList out;
  for (const TenantRecord& t : all) {
    EMBODY_ASSIGN_OR_RETURN(usage, UsageOf(*uow, t.id));
    out.tenants.push_back(TenantView(t, usage));
  }
  return out;
}

Result<api::v1::Tenant> TenantsService::Get(const Principal& p, int64_t id) {
  EMBODY_RETURN_IF_ERROR(RequireAtLeast(p, kViewer, "reading tenants"));
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(t, uow->tenants().GetTenant(id, false));
  if (!t || (!p.IsClusterAdmin() && t->id != p.tenant_id)) {
    return common::NotFound("tenant " + std::to_string(id) + " not found");
  }
  EMBODY_ASSIGN_OR_RETURN(usage, UsageOf(*uow, t->id));
  return TenantView(*t, usage);
}

Result<api::v1::TenantUsage> TenantsService::Usage(const Principal& p, int64_t id,
                                                   const std::string& from,
                                                   const std::string& to) {
  EMBODY_RETURN_IF_ERROR(RequireAtLeast(p, kViewer, "reading usage"));
  const int64_t now = now_();
  std::string to_day = common::FormatTimeMillis(now).substr(0, 10);
  std::string from_day = common::FormatTimeMillis(now - 29LL * 86'400'000).substr(0, 10);
  if (!from.empty()) {
    auto d = ParseDay(from);
    if (!d) return common::InvalidArgument("must be a date, YYYY-MM-DD", "from");
    from_day = *d;
  }
  if (!to.empty()) {
    auto d = ParseDay(to);
    if (!d) return common::InvalidArgument("must be a date, YYYY-MM-DD", "to");
    to_day = *d;
  }
  if (from_day > to_day) return common::InvalidArgument("must not be after `to`", "from");
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(t, uow->tenants().GetTenant(id, false));
  if (!t || (!p.IsClusterAdmin() && t->id != p.tenant_id)) {
    return common::NotFound("tenant " + std::to_string(id) + " not found");
  }
  EMBODY_ASSIGN_OR_RETURN(rows, uow->fair_share().ListDailyUsage(id, from_day, to_day));
  EMBODY_ASSIGN_OR_RETURN(tokens, uow->tenants().ListTokens(id));
  std::map<int64_t, std::string> names;
  for (const TokenRecord& k : tokens) names[k.id] = k.name;
  api::v1::TenantUsage out;
  out.tenant_id = t->id;
  out.tenant = t->name;
  out.from = from_day;
  out.to = to_day;
  std::map<std::string, double> by_type;
  for (const DailyUsage& r : rows) {
    auto name = names.find(r.token_id);
    out.days.push_back({r.day, r.slot_type,
                        r.token_id ? std::optional<int64_t>(r.token_id) : std::nullopt,
                        name != names.end() ? std::optional<std::string>(name->second)
                                            : std::nullopt,
                        r.slot_seconds});
    by_type[r.slot_type] += r.slot_seconds;
    out.total_slot_seconds += r.slot_seconds;
  }
  out.cpu_slot_hours = by_type["cpu"] / 3600;
  out.gpu_slot_hours = by_type["gpu"] / 3600;
  return out;
}

Result<api::v1::Tenant> TenantsService::Patch(const Principal& p, int64_t id,
                                              const std::string& body,
                                              const std::string& if_match) {
  if (!p.IsClusterAdmin()) {
    // Not even its own (quotas and weights are the operator's to set); another tenant does not
    // exist for a person of it.
    if (PersonRank(p.role) > 0 && id != p.tenant_id) {
      return common::NotFound("tenant " + std::to_string(id) + " not found");
    }
    return Status(common::Code::kPermissionDenied, "changing tenants needs role cluster-admin");
  }
  std::optional<int64_t> expected;
  if (!if_match.empty() && if_match != "*") {
    std::string v = if_match;
    if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
    auto version = common::ParseInt64(v, 0);
    if (!version.ok()) {
      return common::InvalidArgument("If-Match must be a version as returned in ETag", "If-Match");
    }
    expected = *version;
  }
  EMBODY_ASSIGN_OR_RETURN(j, ParseBody(body));
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(t, uow->tenants().GetTenant(id, /*for_update=*/true));
  if (!t) return common::NotFound("tenant " + std::to_string(id) + " not found");
  if (expected && *expected != t->version) {
    return Status(common::Code::kPreconditionFailed,
                  "tenant " + std::to_string(id) + " is at version " + std::to_string(t->version) +
                      ", not " + std::to_string(*expected) + "; read it again",
                  "If-Match");
  }
  TenantRecord updated = *t;
  EMBODY_RETURN_IF_ERROR(ParseTenantFields(j, /*require_name=*/false, &updated));
  EMBODY_RETURN_IF_ERROR(uow->tenants().UpdateTenant(updated, now_()));
  EMBODY_ASSIGN_OR_RETURN(after, uow->tenants().GetTenant(id, false));
  EMBODY_ASSIGN_OR_RETURN(usage, UsageOf(*uow, id));
  EMBODY_RETURN_IF_ERROR(uow->Commit());
  return TenantView(*after, usage);
}

}  // namespace controlplane::service
