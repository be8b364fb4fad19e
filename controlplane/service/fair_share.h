// Weighted fair share between tenants: the usage history each tenant carries from one scheduling
// cycle to the next, and the dominant share the scheduler orders tenants by.
//
// History is decayed slot-seconds per slot type: every slot held for a second adds one, and the
// total halves every `half_life_seconds` (Slurm's PriorityDecayHalfLife). Dividing it by
// half_life / ln 2 turns it back into slots: a tenant that held s slots for a long time has a
// history worth s slots. The dominant share (DRF over slot types) adds what the tenant holds now
// to that, divides by the cluster's slots of each type, takes the largest, and divides by the
// tenant's weight; the tenant with the lowest share goes first.
//
// Pure functions: the scheduler loop persists the history (table fair_share) and calls
// AccrueUsage once per cycle with what each tenant held since the last one.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>

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

// The tenant's dominant share (see above). Slot types the cluster has none of are ignored; a
// weight <= 0 is treated as a tiny one (such a tenant goes last), never as a division by zero.
double DominantShare(const SlotSeconds& usage, const SlotCounts& held,
                     const SlotCounts& cluster_total, double weight, double half_life_seconds);

}  // namespace controlplane::service
