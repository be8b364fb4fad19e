// Usage accounting: what the jobs holding slots used since the last accrual, turned into the
// fair-share history (decayed slot-seconds per tenant and slot type, fair_share.h) and into
// plain slot-seconds per tenant, submitting token, UTC day and slot type (table usage_daily).
//
// Pure: the scheduler loop reads the holdings and the stored state in its transaction, calls
// Accrue, and writes back what it returns. Holdings are sampled when Accrue runs and count for
// the whole interval since the last accrual, so the loop accrues every few seconds, not once an
// hour; after a long gap (a leader change, the server down) only the last `max_gap_ms` counts,
// because nobody knows what ran before.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "controlplane/service/fair_share.h"
#include "controlplane/service/store.h"

namespace controlplane::service {

// What one job holds now.
struct Holding {
  int64_t tenant_id = 0;
  int64_t token_id = 0;  // the token that submitted it; 0: not known
  int kind = kCpuSlots;
  int64_t slots = 0;
};

struct DailyUsage {
  int64_t tenant_id = 0;
  int64_t token_id = 0;
  std::string day;  // "2026-11-23", UTC
  std::string slot_type;
  double slot_seconds = 0;
  bool operator==(const DailyUsage&) const = default;
};

struct FairShareState {
  std::map<int64_t, SlotSeconds> usage;  // tenant -> decayed slot-seconds
  std::optional<int64_t> accrued_ms;     // the time `usage` was advanced to; nullopt: never
};

// The live allocations of jobs that may hold processes (SCHEDULED, RUNNING, CANCELLING,
// RESTARTING), one Holding per job.
std::vector<Holding> HoldingsOf(const std::vector<JobRecord>& jobs,
                                const std::vector<AllocationRecord>& allocations);

std::map<int64_t, SlotCounts> HeldByTenant(const std::vector<Holding>& held);

// Slot-seconds of `held` over [from_ms, to_ms), split at UTC midnights; by day, tenant, token,
// slot type.
std::vector<DailyUsage> DailyUsageOver(const std::vector<Holding>& held, int64_t from_ms,
                                       int64_t to_ms);

// "YYYY-MM-DD" of a time in milliseconds since the epoch, in UTC.
std::string UtcDay(int64_t ms);

struct Accrual {
  bool due = false;  // false: too soon since the last one; write nothing
  FairShareState state;
  std::vector<DailyUsage> daily;
};

// Advances `state` to `now_ms`: history decays over the whole interval and gains what `held`
// holds over its last min(interval, max_gap_ms). Not due before `period_ms` has passed (or when
// the clock went back); the first accrual only starts the clock.
Accrual Accrue(const FairShareState& state, const std::vector<Holding>& held, int64_t now_ms,
               double half_life_seconds, int64_t period_ms, int64_t max_gap_ms);

}  // namespace controlplane::service
