// Fair-share history and daily usage (tables of migration 0005_fair_share.sql). Rows go in as
// arrays through unnest, one statement per call, because the leader writes them every few
// seconds.
#include <cstdio>
#include <cstdlib>

#include "controlplane/db/stores.h"

namespace controlplane::db {

using common::Result;
using common::Status;
using service::DailyUsage;
using service::FairShareState;

namespace {

constexpr char kLoadUsage[] =
    "SELECT tenant_id, slot_type, decayed_slot_seconds::text AS v FROM fair_share";
constexpr char kLoadClock[] =
    "SELECT " EMBODY_SQL_MS("accrued_at") " AS ms FROM fair_share_clock";
constexpr char kSaveUsage[] =
    "INSERT INTO fair_share (tenant_id, slot_type, decayed_slot_seconds)"
    " SELECT * FROM unnest($1::bigint[], $2::text[], $3::double precision[])"
    " ON CONFLICT (tenant_id, slot_type)"
    " DO UPDATE SET decayed_slot_seconds = EXCLUDED.decayed_slot_seconds";
constexpr char kSaveClock[] =
    "INSERT INTO fair_share_clock (only_row, accrued_at) VALUES (true, " EMBODY_SQL_TS("$1") ")"
    " ON CONFLICT (only_row) DO UPDATE SET accrued_at = EXCLUDED.accrued_at";
constexpr char kAddDaily[] =
    "INSERT INTO usage_daily (tenant_id, token_id, day, slot_type, slot_seconds)"
    " SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::date[], $4::text[],"
    "                      $5::double precision[])"
    " ON CONFLICT (tenant_id, day, token_id, slot_type)"
    " DO UPDATE SET slot_seconds = usage_daily.slot_seconds + EXCLUDED.slot_seconds";
constexpr char kListDaily[] =
    "SELECT tenant_id, token_id, day::text AS day, slot_type, slot_seconds::text AS s"
    " FROM usage_daily WHERE ($1::bigint IS NULL OR tenant_id = $1)"
    " AND day BETWEEN $2::date AND $3::date ORDER BY day, tenant_id, token_id, slot_type";

std::string Double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

// A PostgreSQL array literal of values that need no quoting (numbers, dates, "cpu").
class ArrayLiteral {
 public:
  void Add(const std::string& v) { s_ += (s_.empty() ? "" : ",") + v; }
  std::string str() const { return "{" + s_ + "}"; }

 private:
  std::string s_;
};

}  // namespace

Result<FairShareState> PgFairShareStore::Load() {
  FairShareState state;
  auto rows = tx_.Exec(kLoadUsage);
  if (!rows.ok()) return rows.status();
  for (size_t i = 0; i < rows->size(); ++i) {
    const int kind = service::SlotKindOf(rows->Str(i, "slot_type"));
    if (kind < 0) continue;
    state.usage[rows->Int(i, "tenant_id")][kind] = std::strtod(rows->Str(i, "v").c_str(), nullptr);
  }
  auto clock = tx_.Exec(kLoadClock);
  if (!clock.ok()) return clock.status();
  if (!clock->empty()) state.accrued_ms = clock->Int(0, "ms");
  return state;
}

Status PgFairShareStore::Save(const FairShareState& state) {
  ArrayLiteral tenants, types, values;
  for (const auto& [tenant, usage] : state.usage) {
    for (int k = 0; k < service::kSlotKinds; ++k) {
      tenants.Add(std::to_string(tenant));
      types.Add(service::SlotKindName(k));
      values.Add(Double(usage[k]));
    }
  }
  if (!state.usage.empty()) {
    auto r = tx_.Exec(kSaveUsage, {P(tenants.str()), P(types.str()), P(values.str())});
    if (!r.ok()) return r.status();
  }
  if (state.accrued_ms) {
    auto r = tx_.Exec(kSaveClock, {P(*state.accrued_ms)});
    if (!r.ok()) return r.status();
  }
  return Status::Ok();
}

Status PgFairShareStore::AddDailyUsage(const std::vector<DailyUsage>& rows) {
  if (rows.empty()) return Status::Ok();
  ArrayLiteral tenants, tokens, days, types, seconds;
  for (const DailyUsage& u : rows) {
    if (service::SlotKindOf(u.slot_type) < 0) return common::Internal("bad slot type " + u.slot_type);
    tenants.Add(std::to_string(u.tenant_id));
    tokens.Add(std::to_string(u.token_id));
    days.Add(u.day);
    types.Add(u.slot_type);
    seconds.Add(Double(u.slot_seconds));
  }
  auto r = tx_.Exec(kAddDaily, {P(tenants.str()), P(tokens.str()), P(days.str()), P(types.str()),
                                P(seconds.str())});
  return r.ok() ? Status::Ok() : r.status();
}

Result<std::vector<DailyUsage>> PgFairShareStore::ListDailyUsage(std::optional<int64_t> tenant_id,
                                                                const std::string& from_day,
                                                                const std::string& to_day) {
  auto rows = tx_.Exec(kListDaily, {tenant_id ? P(*tenant_id) : std::nullopt, P(from_day),
                                    P(to_day)});
  if (!rows.ok()) return rows.status();
  std::vector<DailyUsage> out;
  for (size_t i = 0; i < rows->size(); ++i) {
    out.push_back({rows->Int(i, "tenant_id"), rows->Int(i, "token_id"), rows->Str(i, "day"),
                   rows->Str(i, "slot_type"), std::strtod(rows->Str(i, "s").c_str(), nullptr)});
  }
  return out;
}

Result<int64_t> PgFairShareStore::DeleteDailyUsageBefore(const std::string& day, int limit) {
  auto r = tx_.Exec(
      "WITH gone AS (DELETE FROM usage_daily WHERE ctid IN (SELECT ctid FROM usage_daily WHERE"
      " day < $1::date LIMIT $2) RETURNING 1) SELECT count(*) AS n FROM gone",
      {P(day), P(limit)});
  if (!r.ok()) return r.status();
  return r->Int(0, "n");
}

}  // namespace controlplane::db
