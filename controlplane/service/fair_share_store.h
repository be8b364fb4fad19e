// Where the scheduler loop keeps the fair-share history and usage accounting
// (usage_accounting.h) between cycles and across leader changes: tables fair_share,
// fair_share_clock and usage_daily (migration 0005_fair_share.sql). Used through a UnitOfWork,
// like every store (store.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "controlplane/service/usage_accounting.h"

namespace controlplane::service {

class FairShareStore {
 public:
  virtual ~FairShareStore() = default;
  // Every tenant's decayed usage and the time it was advanced to (nullopt: never yet).
  virtual Result<FairShareState> Load() = 0;
  // Replaces the stored usage of every tenant in `state` and the time (the leader only).
  virtual Status Save(const FairShareState& state) = 0;
  // Adds each row's slot-seconds to its (tenant, day, token, slot type) total.
  virtual Status AddDailyUsage(const std::vector<DailyUsage>& rows) = 0;
  // Totals of one tenant (nullopt: all) for days in [from_day, to_day] ("YYYY-MM-DD"), by day,
  // tenant, token, slot type.
  virtual Result<std::vector<DailyUsage>> ListDailyUsage(std::optional<int64_t> tenant_id,
                                                         const std::string& from_day,
                                                         const std::string& to_day) = 0;
  // Deletes at most `limit` daily rows of days before `day` ("YYYY-MM-DD"); returns how many.
  virtual Result<int64_t> DeleteDailyUsageBefore(const std::string& day, int limit) = 0;
};

}  // namespace controlplane::service
