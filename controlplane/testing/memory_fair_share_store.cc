// The twin's fair-share history and daily usage, mirroring controlplane/db/fair_share_store.cc:
// the tables' checks (slot type, non-negative history) and references to tenants. Days are
// accepted in the ISO form the services write ("2026-11-23") only; PostgreSQL's date input would
// also take other spellings, which no caller uses. Also the scheduler leadership's epoch
// (leader_fence.h), the other table only the scheduler loop writes.
#include <cstdio>

#include "controlplane/testing/memory_tables.h"

namespace controlplane::testing {

using common::Result;
using common::Status;
using service::DailyUsage;
using service::FairShareState;

namespace {

bool IsoDay(const std::string& d) {
  int y = 0, m = 0, day = 0;
  char tail = 0;
  if (d.size() != 10 || d[4] != '-' || d[7] != '-') return false;
  if (std::sscanf(d.c_str(), "%4d-%2d-%2d%c", &y, &m, &day, &tail) != 3) return false;
  static const int kDays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (y < 1 || m < 1 || m > 12 || day < 1 || day > kDays[m - 1]) return false;
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return !(m == 2 && day == 29 && !leap);
}

}  // namespace

Result<FairShareState> MemoryFairShareStore::Load() {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  FairShareState state;
  for (const auto& [key, v] : tx_.tables.fair_share.get()) state.usage[key.first][key.second] = v;
  state.accrued_ms = tx_.tables.fair_share_clock.get();
  return state;
}

Status MemoryFairShareStore::Save(const FairShareState& state) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  // One statement for every row: it fails whole, before anything changes.
  for (const auto& [tenant, usage] : state.usage) {
    EMBODY_RETURN_IF_ERROR(
        tx_.Reference(tx_.tables.tenants.get().count(tenant) > 0, "fair_share.tenant_id"));
    for (double v : usage) {
      if (v < 0) {
        return tx_.Fail(common::Internal(
            "memory database: check constraint fair_share_decayed_slot_seconds_check"));
      }
    }
  }
  if (!state.usage.empty()) {
    auto& rows = tx_.tables.fair_share.mut();
    for (const auto& [tenant, usage] : state.usage) {
      for (int k = 0; k < service::kSlotKinds; ++k) rows[{tenant, k}] = usage[k];
    }
  }
  if (state.accrued_ms) tx_.tables.fair_share_clock.mut() = state.accrued_ms;
  return Status::Ok();
}

Status MemoryFairShareStore::AddDailyUsage(const std::vector<DailyUsage>& rows) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  if (rows.empty()) return Status::Ok();
  for (const DailyUsage& u : rows) {
    // Refused before any statement runs: the transaction goes on, as with PostgreSQL.
    if (service::SlotKindOf(u.slot_type) < 0)
      return common::Internal("bad slot type " + u.slot_type);
  }
  for (const DailyUsage& u : rows) {
    if (!IsoDay(u.day)) {
      return tx_.Fail(
          common::Internal("memory database: invalid input syntax for type date: " + u.day));
    }
    EMBODY_RETURN_IF_ERROR(
        tx_.Reference(tx_.tables.tenants.get().count(u.tenant_id) > 0, "usage_daily.tenant_id"));
  }
  auto& table = tx_.tables.usage_daily.mut();
  for (const DailyUsage& u : rows)
    table[{u.day, u.tenant_id, u.token_id, u.slot_type}] += u.slot_seconds;
  return Status::Ok();
}

Result<std::vector<DailyUsage>> MemoryFairShareStore::ListDailyUsage(
    std::optional<int64_t> tenant_id, const std::string& from_day, const std::string& to_day) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  for (const std::string* d : {&from_day, &to_day}) {
    if (!IsoDay(*d)) {
      return tx_.Fail(
          common::Internal("memory database: invalid input syntax for type date: " + *d));
    }
  }
  std::vector<DailyUsage> out;
  for (const auto& [key, seconds] : tx_.tables.usage_daily.get()) {  // by day, tenant, token, type
    const auto& [day, tenant, token, slot_type] = key;
    if (day < from_day || day > to_day || (tenant_id && tenant != *tenant_id)) continue;
    out.push_back({tenant, token, day, slot_type, seconds});
  }
  return out;
}

Result<int64_t> MemoryFairShareStore::DeleteDailyUsageBefore(const std::string& day, int limit) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  if (!IsoDay(day)) {
    return tx_.Fail(common::Internal("memory database: invalid input syntax for type date: " + day));
  }
  auto& rows = tx_.tables.usage_daily.mut();
  int64_t n = 0;
  for (auto it = rows.begin(); it != rows.end() && n < limit;) {
    if (std::get<0>(it->first) >= day) break;  // ordered by day first
    it = rows.erase(it);
    ++n;
  }
  return n;
}

Result<int64_t> MemoryLeaderFence::Advance(const std::string&) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  return ++tx_.tables.leader_epoch.mut();
}

Status MemoryLeaderFence::Hold(int64_t epoch) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  const int64_t current = tx_.tables.leader_epoch.get();
  if (current == epoch) return Status::Ok();
  return common::FailedPrecondition("no longer the scheduler leader: leadership " +
                                    std::to_string(epoch) + " was followed by " +
                                    std::to_string(current));
}

}  // namespace controlplane::testing
