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

double DominantShare(const SlotSeconds& usage, const SlotCounts& held,
                     const SlotCounts& cluster_total, double weight, double half_life_seconds) {
  const double to_slots = half_life_seconds > 0 ? std::log(2.0) / half_life_seconds : 0;
  double dominant = 0;
  for (int k = 0; k < kSlotKinds; ++k) {
    if (cluster_total[k] <= 0) continue;
    const double slots = usage[k] * to_slots + static_cast<double>(held[k]);
    dominant = std::max(dominant, slots / static_cast<double>(cluster_total[k]));
  }
  return dominant / std::max(weight, kMinWeight);
}

}  // namespace controlplane::service
