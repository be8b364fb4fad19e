#include "cli/tenancy_format.h"

#include <cstdio>

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

std::string UsedOf(const json& t, const char* used_key, const char* quota_key) {
  std::string used = Cell(At(t, "usage"), used_key);
  if (quota_key == nullptr) return used;
  return used + "/" + Cell(At(t, "quota"), quota_key);
}

// Bytes as GiB with two decimals; "-" for null (no limit) or absent.
std::string Gib(const json& bytes) {
  if (!bytes.is_number()) return "-";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f", bytes.get<double>() / (1024.0 * 1024 * 1024));
  return buf;
}

// Storage held against quota.storage_bytes, in GiB: "1.50/10.00", "0.25/-" without a limit.
std::string StorageOf(const json& t) {
  return Gib(At(At(t, "usage"), "storage_bytes")) + "/" + Gib(At(At(t, "quota"), "storage_bytes"));
}

std::string Block(const std::vector<std::pair<std::string, std::string>>& lines) {
  size_t w = 0;
  for (const auto& [k, v] : lines) w = std::max(w, k.size());
  std::string out;
  for (const auto& [k, v] : lines) out += k + ":" + std::string(w - k.size() + 1, ' ') + v + "\n";
  return out;
}

std::string TokenState(const json& t, int64_t now_ms) {
  if (!At(t, "revoked_at").is_null()) return "revoked";
  const json& exp = At(t, "expires_at");
  if (exp.is_string()) {
    auto ms = common::ParseUtcTime(exp.get<std::string>());
    if (ms && *ms <= now_ms) return "expired";
  }
  return "active";
}

}  // namespace

std::string Cell(const json& j, const char* key) {
  const json& v = At(j, key);
  if (v.is_null()) return "-";
  return v.is_string() ? v.get<std::string>() : v.dump();
}

std::string TenantsTable(const json& reply) {
  std::vector<std::vector<std::string>> rows = {{"ID", "NAME", "WEIGHT", "SLOTS", "RUNNING",
                                                 "PENDING", "NODES/JOB", "STORAGE GIB", "VERSION"}};
  for (const json& t : At(reply, "tenants")) {
    rows.push_back({Cell(t, "id"), Cell(t, "name"), Cell(t, "weight"),
                    UsedOf(t, "slots_in_use", "slots"), UsedOf(t, "running_jobs", "running_jobs"),
                    UsedOf(t, "pending_jobs", "pending_jobs"),
                    Cell(At(t, "quota"), "nodes_per_job"), StorageOf(t), Cell(t, "version")});
  }
  return FormatTable(rows);
}

std::string TenantDetail(const json& t) {
  return Block({{"id", Cell(t, "id")},
                {"name", Cell(t, "name")},
                {"weight", Cell(t, "weight")},
                {"slots", UsedOf(t, "slots_in_use", "slots") + " in use/quota"},
                {"running jobs", UsedOf(t, "running_jobs", "running_jobs")},
                {"pending jobs", UsedOf(t, "pending_jobs", "pending_jobs")},
                {"nodes per job", Cell(At(t, "quota"), "nodes_per_job")},
                {"max priority", Cell(At(t, "quota"), "max_priority")},
                {"storage", StorageOf(t) + " GiB in use/quota"},
                {"version", Cell(t, "version")},
                {"created", Cell(t, "created_at")},
                {"updated", Cell(t, "updated_at")}});
}

std::string TokensTable(const json& reply, int64_t now_ms) {
  std::vector<std::vector<std::string>> rows = {
      {"ID", "TENANT", "ROLE", "NAME", "CREATED", "EXPIRES", "STATE"}};
  for (const json& t : At(reply, "tokens")) {
    rows.push_back(
        {Cell(t, "id"), Cell(t, "tenant"), Cell(t, "role"), Cell(t, "name"), Cell(t, "created_at"),
         At(t, "expires_at").is_null() ? "never" : Cell(t, "expires_at"), TokenState(t, now_ms)});
  }
  return FormatTable(rows);
}

std::string TokenDetail(const json& t) {
  std::vector<std::pair<std::string, std::string>> lines = {
      {"id", Cell(t, "id")},
      {"tenant", Cell(t, "tenant") + " (" + Cell(t, "tenant_id") + ")"},
      {"role", Cell(t, "role")},
      {"name", Cell(t, "name")},
      {"created", Cell(t, "created_at")},
      {"expires", At(t, "expires_at").is_null() ? "never" : Cell(t, "expires_at")}};
  if (!At(t, "revoked_at").is_null()) lines.push_back({"revoked", Cell(t, "revoked_at")});
  if (At(t, "token").is_string()) lines.push_back({"token", Cell(t, "token")});
  return Block(lines);
}

std::string WhoAmIText(const json& w) {
  std::vector<std::pair<std::string, std::string>> lines = {
      {"token", Cell(w, "name") + " (id " + Cell(w, "token_id") + ")"},
      {"role", Cell(w, "role")},
      {"tenant", Cell(w, "tenant") + " (id " + Cell(w, "tenant_id") + ")"}};
  if (!At(w, "node_id").is_null()) lines.push_back({"node", Cell(w, "node_id")});
  return Block(lines);
}

std::string UsageTable(const json& u) {
  char buf[64];
  auto hours = [&buf](double seconds) {
    std::snprintf(buf, sizeof(buf), "%.2f", seconds / 3600);
    return std::string(buf);
  };
  std::vector<std::vector<std::string>> rows = {{"DAY", "SLOT", "TOKEN", "SLOT-HOURS"}};
  for (const json& d : At(u, "days")) {
    const json& name = At(d, "token_name");
    rows.push_back({Cell(d, "day"), Cell(d, "slot_type"),
                    name.is_string() ? name.get<std::string>() : "-",
                    hours(d.value("slot_seconds", 0.0))});
  }
  const json& h = At(u, "slot_hours");
  return "tenant " + Cell(u, "tenant") + ", " + Cell(u, "from") + " to " + Cell(u, "to") + "\n" +
         FormatTable(rows) + "total: " + hours(3600 * h.value("cpu", 0.0)) + " cpu slot-hours, " +
         hours(3600 * h.value("gpu", 0.0)) + " GPU-hours\n";
}

std::string AuditTable(const json& entries) {
  std::vector<std::vector<std::string>> rows = {
      {"TIME", "ACTOR", "ROLE", "TENANT", "METHOD", "ROUTE", "TARGET", "STATUS", "OUTCOME"}};
  for (const json& e : entries) {
    rows.push_back({Cell(e, "time"), Cell(e, "actor"), Cell(e, "role"), Cell(e, "tenant"),
                    Cell(e, "method"), Cell(e, "route"), Cell(e, "target"), Cell(e, "status"),
                    Cell(e, "outcome")});
  }
  return FormatTable(rows);
}

std::string NodesTable(const json& reply) {
  std::vector<std::vector<std::string>> rows = {
      {"ID", "NAME", "ADDRESS", "STATE", "CPU", "GPUS", "USED", "DRAINING", "LAST HEARTBEAT"}};
  for (const json& n : At(reply, "nodes")) {
    const json& gpus = At(n, "gpus");
    rows.push_back({Cell(n, "id"), Cell(n, "name"), Cell(n, "address"), Cell(n, "state"),
                    Cell(n, "cpu_slots"), gpus.is_array() ? std::to_string(gpus.size()) : "-",
                    Cell(n, "slots_used"), At(n, "draining") == true ? "yes" : "no",
                    Cell(n, "last_heartbeat")});
  }
  return FormatTable(rows);
}

}  // namespace cli
