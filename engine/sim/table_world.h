// TableWorld: the built-in table-top simulator core, vectorised over N environments.
//
// Each environment is a table (the plane z = 0) inside a workspace box, an end effector (a point
// with a parallel gripper, modelled as a sphere of radius kEffectorRadius) and up to kMaxBlocks
// cubes of half size kBlockHalf. State is stored struct-of-arrays (one vector per coordinate, env
// e's block b at index e * kMaxBlocks + b), so a step is a few tight loops over environments.
//
// Kinematics and contact, applied in this order by Step, per environment, for an action
// (dx, dy, dz, grip), each clamped to [-1, 1]:
//   1. Gripper: grip > 0 commands it closed, otherwise open. On the step it goes from open to
//      closed, the nearest block whose centre is within kGraspRadius horizontally and
//      kGraspHeight vertically of the effector is grasped (attached); a held block keeps its
//      offset to the effector (its bottom never goes below the table). Opening releases it.
//   2. Motion: the effector moves by kMaxStep * (dx, dy, dz), clamped to the workspace (x, y in
//      ±kHalfExtent, z in [kEffectorMinZ, kMaxZ]), along a straight line cut into substeps of at
//      most kSubstep; after each substep a held block follows and contacts (3, 5) are resolved,
//      so a fast effector cannot pass through a block.
//   3. Push: a free block whose footprint the effector's sphere overlaps (horizontal distance of
//      centres < kEffectorRadius + kBlockHalf, effector lower than the block's top plus its
//      radius) is moved straight away from the effector until they just touch: a position-based
//      contact without friction or rotation. An open gripper straddles a block it is right above
//      (horizontal distance < kGraspRadius) instead of pushing it, so it can descend to grasp.
//   4. Gravity: a free block above the table falls (vz -= kGravity * kDt, Euler) and stops on it.
//   5. Free blocks that overlap are separated along the line between their centres (half each),
//      and every block is clamped to the workspace.
// Nothing is random here; randomness lives in reset (engine/sim/sim_task.h), so a step is a pure
// function of state and action and trajectories are bit-identical for the same seed and actions.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace engine::sim {

inline constexpr int kMaxBlocks = 2;
inline constexpr int kActionDim = 4;              // (dx, dy, dz, grip)
inline constexpr double kHalfExtent = 0.3;        // m: the table is [-0.3, 0.3]²
inline constexpr double kMaxZ = 0.3;              // m
inline constexpr double kEffectorMinZ = 0.01;     // m
inline constexpr double kMaxStep = 0.03;          // m per step at |a| = 1
inline constexpr double kSubstep = 0.005;         // m: contact is resolved at least this often
inline constexpr double kEffectorRadius = 0.015;  // m
inline constexpr double kBlockHalf = 0.025;       // m: 5 cm cubes
inline constexpr double kGraspRadius = 0.02;      // m, horizontal
inline constexpr double kGraspHeight = 0.025;     // m, vertical
inline constexpr double kGravity = 9.81;          // m/s²
inline constexpr double kDt = 0.05;               // s per step (20 Hz control)

class TableWorld {
 public:
  explicit TableWorld(int num_envs);

  int num_envs() const { return num_envs_; }

  // Places env e's effector at `ee` (3 floats) with the gripper open, `num_blocks` blocks resting
  // on the table at `block_xy` (2 per block), nothing held.
  void ResetEnv(int e, const double* ee, int num_blocks, const double* block_xy);
  // Applies actions (num_envs, kActionDim), row-major, to every environment.
  void Step(std::span<const float> actions);
  // The same for one environment (what Step does for each).
  void StepEnv(int e, const float* action);

  // Accessors: effector position, gripper (true = closed), block b's centre, held block or -1.
  double ee(int e, int axis) const { return ee_[axis][e]; }
  bool gripper_closed(int e) const { return closed_[e] != 0; }
  int num_blocks(int e) const { return num_blocks_[e]; }
  double block(int e, int b, int axis) const { return block_[axis][Slot(e, b)]; }
  int held(int e) const { return held_[e]; }
  // True when block b is on the table (not held, bottom at the table, not falling).
  bool BlockResting(int e, int b) const;

  // Direct setters for tests and tasks that need a specific configuration.
  void SetBlock(int e, int b, double x, double y, double z);
  void SetEffector(int e, double x, double y, double z);

 private:
  static size_t Slot(int e, int b) { return static_cast<size_t>(e) * kMaxBlocks + b; }
  void Grasp(int e);
  void Push(int e);
  void Fall(int e);
  void Separate(int e);

  int num_envs_;
  std::vector<double> ee_[3];      // (N)
  std::vector<uint8_t> closed_;    // (N)
  std::vector<int> held_;          // (N)
  std::vector<double> offset_[3];  // (N): held block centre − effector
  std::vector<int> num_blocks_;    // (N)
  std::vector<double> block_[3];   // (N · kMaxBlocks)
  std::vector<double> block_vz_;   // (N · kMaxBlocks)
};

}  // namespace engine::sim
