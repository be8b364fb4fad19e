#include "api/v1/tenant.h"

#include "api/v1/json_fields.h"
#include "common/time_util.h"

namespace api::v1 {

using nlohmann::json;

namespace {

json LimitsJson(const TenantLimits& q) {
  return {{"slots", OrNull(q.slots)},
          {"running_jobs", OrNull(q.running_jobs)},
          {"pending_jobs", OrNull(q.pending_jobs)},
          {"nodes_per_job", OrNull(q.nodes_per_job)},
          {"max_priority", OrNull(q.max_priority)},
          {"storage_bytes", OrNull(q.storage_bytes)}};
}

TenantLimits ReadLimits(FieldReader& r) {
  TenantLimits q;
  q.slots = r.NullableInt32("slots");
  q.running_jobs = r.NullableInt32("running_jobs");
  q.pending_jobs = r.NullableInt32("pending_jobs");
  q.nodes_per_job = r.NullableInt32("nodes_per_job");
  q.max_priority = r.NullableInt32("max_priority");
  q.storage_bytes = r.NullableInt("storage_bytes");
  return q;
}

TenantHolding ReadHolding(FieldReader& r) {
  TenantHolding u;
  u.slots_in_use = r.Int("slots_in_use");
  u.running_jobs = r.Int("running_jobs");
  u.pending_jobs = r.Int("pending_jobs");
  u.storage_bytes = r.Int("storage_bytes");
  return u;
}

Tenant ReadTenant(FieldReader& r) {
  Tenant t;
  t.id = r.Int("id");
  t.name = r.String("name");
  t.weight = r.Number("weight");
  t.quota = ReadNested<TenantLimits>(r, "quota", ReadLimits);
  t.usage = ReadNested<TenantHolding>(r, "usage", ReadHolding);
  t.version = r.Int("version");
  t.created_ms = r.Time("created_at");
  t.updated_ms = r.Time("updated_at");
  return t;
}

TenantList ReadTenantList(FieldReader& r) {
  return {ReadArray<Tenant>(r, "tenants", ReadTenant)};
}

TenantUsageDay ReadDay(FieldReader& r) {
  TenantUsageDay d;
  d.day = r.String("day");
  d.slot_type = r.String("slot_type");
  d.token_id = r.NullableInt("token_id");
  d.token_name = r.NullableString("token_name");
  d.slot_seconds = r.Number("slot_seconds");
  return d;
}

struct SlotHours {
  double cpu = 0;
  double gpu = 0;
};

TenantUsage ReadUsage(FieldReader& r) {
  TenantUsage u;
  u.tenant_id = r.Int("tenant_id");
  u.tenant = r.String("tenant");
  u.from = r.String("from");
  u.to = r.String("to");
  u.days = ReadArray<TenantUsageDay>(r, "days", ReadDay);
  u.total_slot_seconds = r.Number("total_slot_seconds");
  const SlotHours h = ReadNested<SlotHours>(r, "slot_hours", [](FieldReader& s) {
    return SlotHours{s.Number("cpu"), s.Number("gpu")};
  });
  u.cpu_slot_hours = h.cpu;
  u.gpu_slot_hours = h.gpu;
  return u;
}

}  // namespace

json ToJson(const Tenant& t) {
  return {{"id", t.id},
          {"name", t.name},
          {"weight", t.weight},
          {"quota", LimitsJson(t.quota)},
          {"usage",
           {{"slots_in_use", t.usage.slots_in_use},
            {"running_jobs", t.usage.running_jobs},
            {"pending_jobs", t.usage.pending_jobs},
            {"storage_bytes", t.usage.storage_bytes}}},
          {"version", t.version},
          {"created_at", common::FormatTimeMillis(t.created_ms)},
          {"updated_at", common::FormatTimeMillis(t.updated_ms)}};
}

json ToJson(const TenantList& l) {
  json tenants = json::array();
  for (const Tenant& t : l.tenants) tenants.push_back(ToJson(t));
  return {{"tenants", std::move(tenants)}};
}

json ToJson(const TenantUsage& u) {
  json days = json::array();
  for (const TenantUsageDay& d : u.days) {
    days.push_back({{"day", d.day},
                    {"slot_type", d.slot_type},
                    {"token_id", OrNull(d.token_id)},
                    {"token_name", OrNull(d.token_name)},
                    {"slot_seconds", d.slot_seconds}});
  }
  return {{"tenant_id", u.tenant_id},
          {"tenant", u.tenant},
          {"from", u.from},
          {"to", u.to},
          {"days", std::move(days)},
          {"total_slot_seconds", u.total_slot_seconds},
          {"slot_hours", {{"cpu", u.cpu_slot_hours}, {"gpu", u.gpu_slot_hours}}}};
}

common::Result<Tenant> ParseTenant(const json& j) { return ReadDocument<Tenant>(j, ReadTenant); }

common::Result<TenantList> ParseTenantList(const json& j) {
  return ReadDocument<TenantList>(j, ReadTenantList);
}

common::Result<TenantUsage> ParseTenantUsage(const json& j) {
  return ReadDocument<TenantUsage>(j, ReadUsage);
}

}  // namespace api::v1
