#include "cli/tenancy_format.h"

#include <cstdio>

#include <optional>
#include <vector>

#include "cli/format.h"
#include "common/time_util.h"

namespace cli {

using nlohmann::json;

namespace {

const json& At(const json& j, const char* key) {
  static const json kNull;
  return j.is_object() && j.contains(key) ? j[key] : kNull;
}

template <typename T>
std::string OrDash(const std::optional<T>& v) {
  return v ? std::to_string(*v) : "-";
}

// A number as the server's JSON writes it ("1.0", "2.5").
std::string Number(double x) { return json(x).dump(); }

std::string UsedOf(int64_t used, const std::optional<int>& limit) {
  return std::to_string(used) + "/" + OrDash(limit);
}

// Bytes as GiB with two decimals; "-" for none (no limit).
std::string Gib(std::optional<int64_t> bytes) {
  if (!bytes) return "-";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f", static_cast<double>(*bytes) / (1024.0 * 1024 * 1024));
  return buf;
}

// Storage held against quota.storage_bytes, in GiB: "1.50/10.00", "0.25/-" without a limit.
std::string StorageOf(const api::v1::Tenant& t) {
  return Gib(t.usage.storage_bytes) + "/" + Gib(t.quota.storage_bytes);
}

std::string Block(const std::vector<std::pair<std::string, std::string>>& lines) {
  size_t w = 0;
  for (const auto& [k, v] : lines) w = std::max(w, k.size());
  std::string out;
  for (const auto& [k, v] : lines) out += k + ":" + std::string(w - k.size() + 1, ' ') + v + "\n";
  return out;
}

std::string Expires(const api::v1::Token& t) {
  return t.expires_ms ? common::FormatTimeMillis(*t.expires_ms) : "never";
}

std::string TokenState(const api::v1::Token& t, int64_t now_ms) {
  if (t.revoked_ms) return "revoked";
  if (t.expires_ms && *t.expires_ms <= now_ms) return "expired";
  return "active";
}

}  // namespace

std::string Cell(const json& j, const char* key) {
  const json& v = At(j, key);
  if (v.is_null()) return "-";
  return v.is_string() ? v.get<std::string>() : v.dump();
}

std::string TenantsTable(const api::v1::TenantList& reply) {
  std::vector<std::vector<std::string>> rows = {{"ID", "NAME", "WEIGHT", "SLOTS", "RUNNING",
                                                 "PENDING", "NODES/JOB", "STORAGE GIB", "VERSION"}};
  for (const api::v1::Tenant& t : reply.tenants) {
    rows.push_back({std::to_string(t.id), t.name, Number(t.weight),
                    UsedOf(t.usage.slots_in_use, t.quota.slots),
                    UsedOf(t.usage.running_jobs, t.quota.running_jobs),
                    UsedOf(t.usage.pending_jobs, t.quota.pending_jobs),
                    OrDash(t.quota.nodes_per_job), StorageOf(t), std::to_string(t.version)});
  }
  return FormatTable(rows);
}

std::string TenantDetail(const api::v1::Tenant& t) {
  return Block({{"id", std::to_string(t.id)},
                {"name", t.name},
                {"weight", Number(t.weight)},
                {"slots", UsedOf(t.usage.slots_in_use, t.quota.slots) + " in use/quota"},
                {"running jobs", UsedOf(t.usage.running_jobs, t.quota.running_jobs)},
                {"pending jobs", UsedOf(t.usage.pending_jobs, t.quota.pending_jobs)},
                {"nodes per job", OrDash(t.quota.nodes_per_job)},
                {"max priority", OrDash(t.quota.max_priority)},
                {"storage", StorageOf(t) + " GiB in use/quota"},
                {"version", std::to_string(t.version)},
                {"created", common::FormatTimeMillis(t.created_ms)},
                {"updated", common::FormatTimeMillis(t.updated_ms)}});
}

std::string TokensTable(const api::v1::TokenList& reply, int64_t now_ms) {
  std::vector<std::vector<std::string>> rows = {
      {"ID", "TENANT", "ROLE", "NAME", "CREATED", "EXPIRES", "STATE"}};
  for (const api::v1::Token& t : reply.tokens) {
    rows.push_back({std::to_string(t.id), t.tenant, t.role, t.name,
                    common::FormatTimeMillis(t.created_ms), Expires(t), TokenState(t, now_ms)});
  }
  return FormatTable(rows);
}

std::string TokenDetail(const api::v1::CreatedToken& created) {
  const api::v1::Token& t = created.token;
  std::vector<std::pair<std::string, std::string>> lines = {
      {"id", std::to_string(t.id)},
      {"tenant", t.tenant + " (" + std::to_string(t.tenant_id) + ")"},
      {"role", t.role},
      {"name", t.name},
      {"created", common::FormatTimeMillis(t.created_ms)},
      {"expires", Expires(t)}};
  if (t.revoked_ms) lines.push_back({"revoked", common::FormatTimeMillis(*t.revoked_ms)});
  lines.push_back({"token", created.secret});
  return Block(lines);
}

std::string WhoAmIText(const api::v1::WhoAmI& w) {
  std::vector<std::pair<std::string, std::string>> lines = {
      {"token", w.name + " (id " + std::to_string(w.token_id) + ")"},
      {"role", w.role},
      {"tenant", w.tenant + " (id " + std::to_string(w.tenant_id) + ")"}};
  if (w.node_id != 0) lines.push_back({"node", std::to_string(w.node_id)});
  return Block(lines);
}

std::string UsageTable(const api::v1::TenantUsage& u) {
  char buf[64];
  auto hours = [&buf](double seconds) {
    std::snprintf(buf, sizeof(buf), "%.2f", seconds / 3600);
    return std::string(buf);
  };
  std::vector<std::vector<std::string>> rows = {{"DAY", "SLOT", "TOKEN", "SLOT-HOURS"}};
  for (const api::v1::TenantUsageDay& d : u.days) {
    rows.push_back({d.day, d.slot_type, d.token_name.value_or("-"), hours(d.slot_seconds)});
  }
  return "tenant " + u.tenant + ", " + u.from + " to " + u.to + "\n" + FormatTable(rows) +
         "total: " + hours(3600 * u.cpu_slot_hours) + " cpu slot-hours, " +
         hours(3600 * u.gpu_slot_hours) + " GPU-hours\n";
}

std::string AuditTable(const std::vector<api::v1::AuditEntry>& entries) {
  std::vector<std::vector<std::string>> rows = {
      {"TIME", "ACTOR", "ROLE", "TENANT", "METHOD", "ROUTE", "TARGET", "STATUS", "OUTCOME"}};
  for (const api::v1::AuditEntry& e : entries) {
    rows.push_back({common::FormatTimeMillis(e.time_ms), e.actor, e.role, e.tenant, e.method,
                    e.route, e.target, std::to_string(e.status), e.outcome});
  }
  return FormatTable(rows);
}

std::string NodesTable(const api::v1::NodeList& reply) {
  std::vector<std::vector<std::string>> rows = {
      {"ID", "NAME", "ADDRESS", "STATE", "CPU", "GPUS", "USED", "DRAINING", "LAST HEARTBEAT"}};
  for (const api::v1::Node& n : reply.nodes) {
    rows.push_back({std::to_string(n.id), n.name, n.address, n.state,
                    std::to_string(n.cpu_slots), std::to_string(n.gpus.size()),
                    std::to_string(n.slots_used), n.draining ? "yes" : "no",
                    common::FormatTimeMillis(n.last_heartbeat_ms)});
  }
  return FormatTable(rows);
}

}  // namespace cli
