#include "controlplane/service/usage_accounting.h"

#include <algorithm>
#include <tuple>
#include <unordered_map>

#include "common/time_util.h"

namespace controlplane::service {

namespace {

constexpr int64_t kDayMs = 86'400'000;

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

}  // namespace

std::vector<Holding> HoldingsOf(const std::vector<JobRecord>& jobs,
                                const std::vector<AllocationRecord>& allocations) {
  std::unordered_map<int64_t, const JobRecord*> holders;
  for (const JobRecord& j : jobs) {
    if (j.state == api::JobState::kScheduled || j.state == api::JobState::kRunning ||
        j.state == api::JobState::kCancelling || j.state == api::JobState::kRestarting) {
      holders[j.id] = &j;
    }
  }
  std::map<int64_t, Holding> by_job;
  for (const AllocationRecord& a : allocations) {
    auto it = holders.find(a.job_id);
    const int kind = SlotKindOf(a.slot_type);
    if (it == holders.end() || kind < 0) continue;
    Holding& h = by_job[a.job_id];
    h.tenant_id = it->second->tenant_id;
    h.token_id = it->second->token_id;
    h.kind = kind;
    h.slots += a.slots;
  }
  std::vector<Holding> out;
  for (const auto& [id, h] : by_job) out.push_back(h);
  return out;
}

std::map<int64_t, SlotCounts> HeldByTenant(const std::vector<Holding>& held) {
  std::map<int64_t, SlotCounts> out;
  for (const Holding& h : held) out[h.tenant_id][h.kind] += h.slots;
  return out;
}

std::string UtcDay(int64_t ms) {
  std::string time = common::FormatTimeMillis(ms);  // YYYY-MM-DDTHH:MM:SS.fffZ
  return time.substr(0, time.find('T'));
}

std::vector<DailyUsage> DailyUsageOver(const std::vector<Holding>& held, int64_t from_ms,
                                       int64_t to_ms) {
  std::map<std::tuple<std::string, int64_t, int64_t, int>, double> sums;
  for (int64_t start = from_ms; start < to_ms;) {
    const int64_t end = std::min(to_ms, (FloorDiv(start, kDayMs) + 1) * kDayMs);
    const std::string day = UtcDay(start);
    const double seconds = static_cast<double>(end - start) / 1000.0;
    for (const Holding& h : held) {
      if (h.slots > 0) sums[{day, h.tenant_id, h.token_id, h.kind}] += h.slots * seconds;
    }
    start = end;
  }
  std::vector<DailyUsage> out;
  for (const auto& [key, seconds] : sums) {
    const auto& [day, tenant, token, kind] = key;
    out.push_back({tenant, token, day, SlotKindName(kind), seconds});
  }
  return out;
}

Accrual Accrue(const FairShareState& state, const std::vector<Holding>& held, int64_t now_ms,
               double half_life_seconds, int64_t period_ms, int64_t max_gap_ms) {
  Accrual out;
  out.state = state;
  if (!state.accrued_ms) {
    out.due = true;
    out.state.accrued_ms = now_ms;
    return out;
  }
  const int64_t elapsed = now_ms - *state.accrued_ms;
  if (elapsed < std::max<int64_t>(period_ms, 1)) return out;
  const int64_t counted = std::min(elapsed, std::max<int64_t>(max_gap_ms, 0));
  // Decay over the part nobody knows about, then accrue the part that is counted.
  auto usage = AccrueUsageByTenant(state.usage, {}, (elapsed - counted) / 1000.0,
                                   half_life_seconds);
  usage = AccrueUsageByTenant(usage, HeldByTenant(held), counted / 1000.0, half_life_seconds);
  out.due = true;
  out.state.usage = std::move(usage);
  out.state.accrued_ms = now_ms;
  out.daily = DailyUsageOver(held, now_ms - counted, now_ms);
  return out;
}

}  // namespace controlplane::service
