#include "api/v1/audit.h"

#include "api/v1/json_fields.h"
#include "common/time_util.h"

namespace api::v1 {

using nlohmann::json;

namespace {

AuditEntry ReadEntry(FieldReader& r) {
  AuditEntry e;
  e.id = r.Int("id");
  e.time_ms = r.Time("time");
  e.token_id = r.NullableInt("token_id");
  e.actor = r.String("actor");
  e.role = r.String("role");
  e.tenant_id = r.NullableInt("tenant_id");
  e.tenant = r.String("tenant");
  e.method = r.String("method");
  e.route = r.String("route");
  e.path = r.String("path");
  e.target = r.String("target");
  e.status = r.Int32("status");
  e.outcome = r.String("outcome");
  e.request_id = r.String("request_id");
  return e;
}

}  // namespace

json ToJson(const AuditEntry& e) {
  return {{"id", e.id},
          {"time", common::FormatTimeMillis(e.time_ms)},
          {"token_id", OrNull(e.token_id)},
          {"actor", e.actor},
          {"role", e.role},
          {"tenant_id", OrNull(e.tenant_id)},
          {"tenant", e.tenant},
          {"method", e.method},
          {"route", e.route},
          {"path", e.path},
          {"target", e.target},
          {"status", e.status},
          {"outcome", e.outcome},
          {"request_id", e.request_id}};
}

json ToJson(const AuditPage& p) {
  json entries = json::array();
  for (const AuditEntry& e : p.entries) entries.push_back(ToJson(e));
  return {{"entries", std::move(entries)}, {"next_cursor", OrNull(p.next_cursor)}};
}

common::Result<AuditEntry> ParseAuditEntry(const json& j) {
  return ReadDocument<AuditEntry>(j, ReadEntry);
}

common::Result<AuditPage> ParseAuditPage(const json& j) {
  return ReadDocument<AuditPage>(j, [](FieldReader& r) {
    AuditPage p;
    p.entries = ReadArray<AuditEntry>(r, "entries", ReadEntry);
    p.next_cursor = r.NullableString("next_cursor");
    return p;
  });
}

}  // namespace api::v1
