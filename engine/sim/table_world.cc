#include "engine/sim/table_world.h"

#include <algorithm>
#include <cmath>

#include <cstdio>
#include <cstdlib>

namespace engine::sim {
namespace {

// A broken caller contract ("cannot happen"): crash with the contract named.
void Require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "TableWorld: %s\n", what);
  std::abort();
}

double Clamp1(float a) { return std::clamp(static_cast<double>(a), -1.0, 1.0); }

}  // namespace

TableWorld::TableWorld(int num_envs) : num_envs_(num_envs) {
  Require(num_envs > 0, "num_envs must be positive");
  for (int a = 0; a < 3; ++a) {
    ee_[a].assign(num_envs, 0.0);
    offset_[a].assign(num_envs, 0.0);
    block_[a].assign(static_cast<size_t>(num_envs) * kMaxBlocks, 0.0);
  }
  closed_.assign(num_envs, 0);
  held_.assign(num_envs, -1);
  num_blocks_.assign(num_envs, 0);
  block_vz_.assign(static_cast<size_t>(num_envs) * kMaxBlocks, 0.0);
}

void TableWorld::ResetEnv(int e, const double* ee, int num_blocks, const double* block_xy) {
  Require(e >= 0 && e < num_envs_ && num_blocks >= 0 && num_blocks <= kMaxBlocks,
          "ResetEnv: env or block count out of range");
  SetEffector(e, ee[0], ee[1], ee[2]);
  closed_[e] = 0;
  held_[e] = -1;
  num_blocks_[e] = num_blocks;
  for (int b = 0; b < kMaxBlocks; ++b) {
    const bool on = b < num_blocks;
    SetBlock(e, b, on ? block_xy[2 * b] : 0.0, on ? block_xy[2 * b + 1] : 0.0, kBlockHalf);
  }
}

void TableWorld::SetEffector(int e, double x, double y, double z) {
  ee_[0][e] = std::clamp(x, -kHalfExtent, kHalfExtent);
  ee_[1][e] = std::clamp(y, -kHalfExtent, kHalfExtent);
  ee_[2][e] = std::clamp(z, kEffectorMinZ, kMaxZ);
}

void TableWorld::SetBlock(int e, int b, double x, double y, double z) {
  const size_t s = Slot(e, b);
  const double lim = kHalfExtent - kBlockHalf;
  block_[0][s] = std::clamp(x, -lim, lim);
  block_[1][s] = std::clamp(y, -lim, lim);
  block_[2][s] = std::clamp(z, kBlockHalf, kMaxZ);
  block_vz_[s] = 0.0;
}

bool TableWorld::BlockResting(int e, int b) const {
  const size_t s = Slot(e, b);
  return held_[e] != b && block_[2][s] <= kBlockHalf + 1e-9 && block_vz_[s] == 0.0;
}

void TableWorld::Step(std::span<const float> actions) {
  Require(actions.size() == static_cast<size_t>(num_envs_) * kActionDim,
          "Step: actions must be (num_envs, kActionDim)");
  for (int e = 0; e < num_envs_; ++e)
    StepEnv(e, actions.data() + static_cast<size_t>(e) * kActionDim);
}

void TableWorld::StepEnv(int e, const float* action) {
  // 2. Gripper first: a closing edge grasps where the effector is now; opening releases.
  const bool close = action[3] > 0.0f;
  if (close && closed_[e] == 0) {
    closed_[e] = 1;
    Grasp(e);
  } else if (!close && closed_[e] != 0) {
    closed_[e] = 0;
    held_[e] = -1;
  }
  // 1 and 3. Effector motion in substeps of at most kSubstep, contact resolved after each, so a
  // fast effector cannot pass through a block (a step of 3 cm exceeds the 4 cm contact distance's
  // margin once it is inside it).
  const double target[3] = {
      std::clamp(ee_[0][e] + kMaxStep * Clamp1(action[0]), -kHalfExtent, kHalfExtent),
      std::clamp(ee_[1][e] + kMaxStep * Clamp1(action[1]), -kHalfExtent, kHalfExtent),
      std::clamp(ee_[2][e] + kMaxStep * Clamp1(action[2]), kEffectorMinZ, kMaxZ)};
  const double start[3] = {ee_[0][e], ee_[1][e], ee_[2][e]};
  const double length = std::sqrt((target[0] - start[0]) * (target[0] - start[0]) +
                                  (target[1] - start[1]) * (target[1] - start[1]) +
                                  (target[2] - start[2]) * (target[2] - start[2]));
  const int substeps = std::max(1, static_cast<int>(std::ceil(length / kSubstep)));
  for (int k = 1; k <= substeps; ++k) {
    const double f = static_cast<double>(k) / substeps;
    for (int a = 0; a < 3; ++a)
      ee_[a][e] = k == substeps ? target[a] : start[a] + f * (target[a] - start[a]);
    if (held_[e] >= 0) {
      const size_t s = Slot(e, held_[e]);
      const double lim = kHalfExtent - kBlockHalf;
      block_[0][s] = std::clamp(ee_[0][e] + offset_[0][e], -lim, lim);
      block_[1][s] = std::clamp(ee_[1][e] + offset_[1][e], -lim, lim);
      block_[2][s] = std::clamp(ee_[2][e] + offset_[2][e], kBlockHalf, kMaxZ);
      block_vz_[s] = 0.0;
    }
    Push(e);
    Separate(e);
  }
  // 4-5. Gravity, then blocks apart once more (a fallen block may land beside another).
  Fall(e);
  Separate(e);
}

void TableWorld::Grasp(int e) {
  int best = -1;
  double best_d2 = kGraspRadius * kGraspRadius;
  for (int b = 0; b < num_blocks_[e]; ++b) {
    const size_t s = Slot(e, b);
    const double dx = block_[0][s] - ee_[0][e], dy = block_[1][s] - ee_[1][e];
    const double d2 = dx * dx + dy * dy;
    if (d2 <= best_d2 && std::abs(block_[2][s] - ee_[2][e]) <= kGraspHeight) {
      best = b;
      best_d2 = d2;
    }
  }
  held_[e] = best;
  if (best >= 0) {
    const size_t s = Slot(e, best);
    for (int a = 0; a < 3; ++a) offset_[a][e] = block_[a][s] - ee_[a][e];
  }
}

void TableWorld::Push(int e) {
  const double reach = kEffectorRadius + kBlockHalf;
  for (int b = 0; b < num_blocks_[e]; ++b) {
    if (b == held_[e]) continue;
    const size_t s = Slot(e, b);
    if (ee_[2][e] >= block_[2][s] + kBlockHalf + kEffectorRadius) continue;  // passes above
    const double dx = block_[0][s] - ee_[0][e], dy = block_[1][s] - ee_[1][e];
    const double d = std::sqrt(dx * dx + dy * dy);
    if (d >= reach) continue;
    if (closed_[e] == 0 && d < kGraspRadius) continue;  // open fingers straddle it
    // Exactly centred (only reachable with a closed gripper): push along +x, a fixed choice so
    // the step stays deterministic.
    const double ux = d > 1e-12 ? dx / d : 1.0, uy = d > 1e-12 ? dy / d : 0.0;
    const double lim = kHalfExtent - kBlockHalf;
    block_[0][s] = std::clamp(ee_[0][e] + ux * reach, -lim, lim);
    block_[1][s] = std::clamp(ee_[1][e] + uy * reach, -lim, lim);
  }
}

void TableWorld::Fall(int e) {
  for (int b = 0; b < num_blocks_[e]; ++b) {
    if (b == held_[e]) continue;
    const size_t s = Slot(e, b);
    if (block_[2][s] <= kBlockHalf && block_vz_[s] == 0.0) continue;
    block_vz_[s] -= kGravity * kDt;
    block_[2][s] += block_vz_[s] * kDt;
    if (block_[2][s] <= kBlockHalf) {
      block_[2][s] = kBlockHalf;
      block_vz_[s] = 0.0;
    }
  }
}

void TableWorld::Separate(int e) {
  if (num_blocks_[e] < 2) return;
  const double min_d = 2 * kBlockHalf;
  for (int a = 0; a < num_blocks_[e]; ++a) {
    for (int b = a + 1; b < num_blocks_[e]; ++b) {
      const size_t sa = Slot(e, a), sb = Slot(e, b);
      if (std::abs(block_[2][sa] - block_[2][sb]) >= min_d) continue;  // one above the other
      const double dx = block_[0][sb] - block_[0][sa], dy = block_[1][sb] - block_[1][sa];
      const double d = std::sqrt(dx * dx + dy * dy);
      if (d >= min_d) continue;
      const double ux = d > 1e-12 ? dx / d : 1.0, uy = d > 1e-12 ? dy / d : 0.0;
      const double gap = min_d - d;
      const double lim = kHalfExtent - kBlockHalf;
      // A held block does not yield: the free one moves the whole gap.
      const double wa = b == held_[e] ? 1.0 : (a == held_[e] ? 0.0 : 0.5);
      block_[0][sa] = std::clamp(block_[0][sa] - ux * gap * wa, -lim, lim);
      block_[1][sa] = std::clamp(block_[1][sa] - uy * gap * wa, -lim, lim);
      block_[0][sb] = std::clamp(block_[0][sb] + ux * gap * (1 - wa), -lim, lim);
      block_[1][sb] = std::clamp(block_[1][sb] + uy * gap * (1 - wa), -lim, lim);
    }
  }
}

}  // namespace engine::sim
