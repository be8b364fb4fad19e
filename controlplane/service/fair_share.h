// Weighted fair share between tenants: the usage history each tenant carries from one scheduling
// cycle to the next, and the dominant share the scheduler orders tenants by.
//
// History is decayed slot-seconds per slot type: every slot held for a second adds one, and the
// total halves every `half_life_seconds` (Slurm's PriorityDecayHalfLife).
//
// A tenant's share is its part of the cluster's history, not of the cluster's size: its decayed
// slot-seconds, plus what it holds now counted as kHeldNowSeconds of history, over the same sum
// for every tenant (ClusterUsage), per slot type; the dominant share (DRF) takes the largest
// over the types, divided by the tenant's weight; the lowest share goes first. Two backlogged
// tenants of weights 1 and 3 so get 25% and 75% of the slot-seconds on any cluster size within a
// few job lengths, whatever the half-life: a tenant behind its weight takes every slot that
// frees until its history catches up, as under Slurm's fair-share factor. (Measured against the
// cluster's size instead, a day's half-life made an hour of history worth less than one slot held
// now, and two tenants on two slots each refilled their own slot: 50% / 50%.) What a tenant holds
// now still counts a little, so one cycle's placements interleave by weight.
//
// Pure functions: the scheduler loop persists the history (table fair_share) and calls
// AccrueUsage once per cycle with what each tenant held since the last one.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace controlplane::service {

// Slot types, as indices into the per-type arrays below.
inline constexpr int kCpuSlots = 0;
inline constexpr int kGpuSlots = 1;
inline constexpr int kSlotKinds = 2;
// kCpuSlots for "cpu", kGpuSlots for "gpu", -1 for anything else.
int SlotKindOf(const std::string& slot_type);
const char* SlotKindName(int kind);

using SlotSeconds = std::array<double, kSlotKinds>;  // decayed slot-seconds per slot type
using SlotCounts = std::array<int64_t, kSlotKinds>;  // slots per slot type

// `usage` after `elapsed_seconds` more of history in which the tenant held `held` slots
// throughout: usage·2^(-e/h) + held·(h/ln 2)·(1 - 2^(-e/h)), the exact integral of continuously
// decayed holding. half_life_seconds <= 0 keeps no history (returns zeros); elapsed <= 0 changes
// nothing.
SlotSeconds AccrueUsage(const SlotSeconds& usage, const SlotCounts& held, double elapsed_seconds,
                        double half_life_seconds);

// AccrueUsage for every tenant in `usage` or `held` (a tenant missing from one has zeros there).
std::map<int64_t, SlotSeconds> AccrueUsageByTenant(const std::map<int64_t, SlotSeconds>& usage,
                                                   const std::map<int64_t, SlotCounts>& held,
                                                   double elapsed_seconds,
                                                   double half_life_seconds);

// Seconds of history one slot held now counts for in a share (see above).
inline constexpr double kHeldNowSeconds = 1;

// The denominator of every share in one scheduling cycle, per slot type: every tenant's history
// plus what it holds now (kHeldNowSeconds a slot), and never less than the whole cluster held for
// kHeldNowSeconds (so a fresh cluster's shares are fractions of its slots).
struct TenantUsage {
  SlotSeconds usage{};
  SlotCounts held{};
};
SlotSeconds ClusterUsage(const std::vector<TenantUsage>& tenants, const SlotCounts& cluster_total);

// The tenant's dominant share (see above). Slot types the cluster has none of are ignored; a
// weight <= 0 is treated as a tiny one (such a tenant goes last), never as a division by zero.
double DominantShare(const SlotSeconds& usage, const SlotCounts& held,
                     const SlotSeconds& cluster_usage, double weight);

}  // namespace controlplane::service
