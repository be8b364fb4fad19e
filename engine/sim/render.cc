#include "engine/sim/render.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/model/packed_batch.h"

namespace engine::sim {
namespace {

// One camera's mapping from world coordinates to pixel centres.
struct View {
  int u_axis, v_axis;    // world axes along columns and rows
  double u0, v0, scale;  // world coordinate of pixel edge 0 and metres per pixel
  bool flip_v;           // rows grow downward in z
  double U(int col) const { return u0 + (col + 0.5) * scale; }
  double V(int row, int side) const {
    const int r = flip_v ? side - 1 - row : row;
    return v0 + (r + 0.5) * scale;
  }
};

View ViewOf(int camera, int side) {
  const int c = camera % 3;
  View v;
  v.u_axis = c == 2 ? 1 : 0;
  v.v_axis = c == 0 ? 1 : 2;
  v.scale = 2 * kHalfExtent / side;
  v.u0 = -kHalfExtent;
  // The vertical views cover z ∈ [0, kMaxZ] = 0.3 m with the same metres per pixel.
  v.v0 = c == 0 ? -kHalfExtent : 0.0;
  v.flip_v = c != 0;
  return v;
}

}  // namespace

void RenderView(const SimTasks& tasks, int e, int camera, int side, float* image) {
  std::memset(image, 0, sizeof(float) * side * side * 3);
  const TableWorld& w = tasks.world();
  const View view = ViewOf(camera, side);
  const bool top = camera % 3 == 0;
  const double ee_u = w.ee(e, view.u_axis), ee_v = w.ee(e, view.v_axis);
  const double ee_r = std::max(kEffectorRadius, view.scale);
  const float ee_value = w.gripper_closed(e) ? 1.0f : 0.5f;
  const double gu = tasks.goal(e, view.u_axis), gv = tasks.goal(e, view.v_axis);
  const bool reach = tasks.kind() == TaskKind::kReach;
  const double goal_r = reach ? kReachTolerance : kGoalTolerance;
  for (int row = 0; row < side; ++row) {
    const double v = view.V(row, side);
    for (int col = 0; col < side; ++col) {
      const double u = view.U(col);
      float* px = image + (static_cast<size_t>(row) * side + col) * 3;
      for (int b = 0; b < w.num_blocks(e); ++b) {
        if (std::abs(u - w.block(e, b, view.u_axis)) <= kBlockHalf &&
            std::abs(v - w.block(e, b, view.v_axis)) <= kBlockHalf) {
          px[0] = w.held(e) == b ? 1.0f : 0.5f;
        }
      }
      bool in_goal;
      if (reach || top) {
        in_goal = (u - gu) * (u - gu) + (v - gv) * (v - gv) <= goal_r * goal_r;
      } else {
        in_goal = std::abs(u - gu) <= goal_r && v <= 0.02;
      }
      if (in_goal) px[1] = 1.0f;
      if ((u - ee_u) * (u - ee_u) + (v - ee_v) * (v - ee_v) <= ee_r * ee_r) px[2] = ee_value;
    }
  }
}

void CutPatches(const float* image, int side, int count, float* patches) {
  const int grid = side / kPatchSide;
  for (int k = 0; k < count; ++k) {
    const int gy = k / grid, gx = k % grid;
    float* patch = patches + static_cast<size_t>(k) * kPatchSide * kPatchSide * 3;
    for (int iy = 0; iy < kPatchSide; ++iy) {
      const float* src =
          image + (static_cast<size_t>(gy * kPatchSide + iy) * side + gx * kPatchSide) * 3;
      std::memcpy(patch + iy * kPatchSide * 3, src, sizeof(float) * kPatchSide * 3);
    }
  }
}

void Proprioception(const SimTasks& tasks, int e, float* state) {
  const TableWorld& w = tasks.world();
  state[0] = static_cast<float>(w.ee(e, 0) / kHalfExtent);
  state[1] = static_cast<float>(w.ee(e, 1) / kHalfExtent);
  state[2] = static_cast<float>(w.ee(e, 2) / (0.5 * kMaxZ) - 1.0);
  state[3] = w.gripper_closed(e) ? 1.0f : -1.0f;
}

static_assert(kProprioDim + kObjectStateDim <= kStateDim, "the state token holds 16 values");

void ObjectState(const SimTasks& tasks, int e, float* state) {
  const TableWorld& w = tasks.world();
  float* s = state + kProprioDim;
  s[0] = static_cast<float>(w.block(e, 0, 0) / kHalfExtent);
  s[1] = static_cast<float>(w.block(e, 0, 1) / kHalfExtent);
  s[2] = static_cast<float>(w.block(e, 0, 2) / (0.5 * kMaxZ) - 1.0);
  s[3] = static_cast<float>(tasks.goal(e, 0) / kHalfExtent);
  s[4] = static_cast<float>(tasks.goal(e, 1) / kHalfExtent);
  for (int k = 0; k < 3; ++k) {
    s[5 + k] = static_cast<float>((w.block(e, 0, k) - w.ee(e, k)) / kRelativeScale);
  }
  for (int k = 0; k < 2; ++k) {
    s[8 + k] = static_cast<float>((tasks.goal(e, k) - w.ee(e, k)) / kRelativeScale);
  }
  s[10] = w.held(e) == 0 ? 1.0f : -1.0f;
}

}  // namespace engine::sim
