#include "controlplane/service/fair_share.h"

#include <algorithm>
#include <cmath>

namespace controlplane::service {

namespace {
constexpr double kMinWeight = 1e-9;
}  // namespace

int SlotKindOf(const std::string& slot_type) {
  if (slot_type == "cpu") return kCpuSlots;
  if (slot_type == "gpu") return kGpuSlots;
  return -1;
}

const char* SlotKindName(int kind) { return kind == kGpuSlots ? "gpu" : "cpu"; }

SlotSeconds AccrueUsage(const SlotSeconds& usage, const SlotCounts& held, double elapsed_seconds,
                        double half_life_seconds) {
  if (half_life_seconds <= 0) return SlotSeconds{};
  if (elapsed_seconds <= 0) return usage;
  const double keep = std::exp2(-elapsed_seconds / half_life_seconds);
  const double mean_life = half_life_seconds / std::log(2.0);
  SlotSeconds out{};
  for (int k = 0; k < kSlotKinds; ++k) {
    out[k] = usage[k] * keep + static_cast<double>(held[k]) * mean_life * (1 - keep);
  }
  return out;
}

std::map<int64_t, SlotSeconds> AccrueUsageByTenant(const std::map<int64_t, SlotSeconds>& usage,
                                                   const std::map<int64_t, SlotCounts>& held,
                                                   double elapsed_seconds,
                                                   double half_life_seconds) {
  std::map<int64_t, SlotSeconds> out;
  for (const auto& [tenant, u] : usage) out[tenant] = u;
  for (const auto& [tenant, h] : held) out.try_emplace(tenant, SlotSeconds{});
  for (auto& [tenant, u] : out) {
    auto it = held.find(tenant);
    u = AccrueUsage(u, it == held.end() ? SlotCounts{} : it->second, elapsed_seconds,
                    half_life_seconds);
  }
  return out;
}

SlotSeconds ClusterUsage(const std::vector<TenantUsage>& tenants, const SlotCounts& cluster_total) {
  SlotSeconds sum{};
  for (const TenantUsage& t : tenants) {
    for (int k = 0; k < kSlotKinds; ++k) {
      sum[k] += std::max(0.0, t.usage[k]) + static_cast<double>(t.held[k]) * kHeldNowSeconds;
    }
  }
  for (int k = 0; k < kSlotKinds; ++k) {
    sum[k] = cluster_total[k] <= 0
                 ? 0
                 : std::max(sum[k], static_cast<double>(cluster_total[k]) * kHeldNowSeconds);
  }
  return sum;
}

double DominantShare(const SlotSeconds& usage, const SlotCounts& held,
                     const SlotSeconds& cluster_usage, double weight) {
  double dominant = 0;
  for (int k = 0; k < kSlotKinds; ++k) {
    if (cluster_usage[k] <= 0) continue;
    const double mine = std::max(0.0, usage[k]) + static_cast<double>(held[k]) * kHeldNowSeconds;
    dominant = std::max(dominant, mine / cluster_usage[k]);
  }
  return dominant / std::max(weight, kMinWeight);
}

}  // namespace controlplane::service
