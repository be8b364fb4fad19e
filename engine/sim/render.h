// Camera-like images of a SimTasks environment, rendered from its state, and their cut into the
// policy transformer's image patches (engine/model/packed_batch.h: 8×8×3 floats per patch, HWC).
//
// An image is side × side pixels, 3 channels, HWC, values in [0, 1]; a pixel is lit by a shape
// when its centre lies inside the shape's projection. Cameras are orthographic:
//   camera 0  top-down: column ← x ∈ [−0.3, 0.3], row ← y ∈ [−0.3, 0.3] (row 0 at y = −0.3)
//   camera 1  front:    column ← x, row ← z ∈ [0, 0.3] (row 0 at the top, z = 0.3)
//   camera 2  side:     column ← y, row ← z as camera 1
// (camera c ≥ 3 repeats camera c mod 3). Channels:
//   red    blocks, 0.5 + 0.5·(held ? 1 : 0) so a grasped block stands out
//   green  the goal: reach, a disc of radius kReachTolerance about the goal point; push and
//          pick_place, a disc of radius kGoalTolerance on the table (top-down) or a 2 cm bar on
//          the table line (front and side)
//   blue   the effector, a disc of radius max(kEffectorRadius, one pixel): 0.5 open, 1 closed
#pragma once

#include "engine/sim/sim_task.h"

namespace engine::sim {

inline constexpr int kImageSide = 32;  // the default: 4×4 patches of 8×8
inline constexpr int kPatchSide = 8;

// Renders env e of `tasks` from `camera` into image (side, side, 3).
void RenderView(const SimTasks& tasks, int e, int camera, int side, float* image);

// Cuts image (side, side, 3) into (side/8)² patches of 8×8×3 (row-major over the patch grid,
// HWC within a patch) and writes the first `count` to patches (count, 192). side % 8 == 0.
void CutPatches(const float* image, int side, int count, float* patches);

// The proprioceptive state: effector position scaled to about [−1, 1] (x/0.3, y/0.3,
// z/0.15 − 1) and the gripper (+1 closed, −1 open). Writes kProprioDim floats.
inline constexpr int kProprioDim = 4;
void Proprioception(const SimTasks& tasks, int e, float* state);

// The table tasks' object state, the state token's entries after the proprioception (at
// state + kProprioDim, kObjectStateDim floats):
//   0..2   the block's centre (x/0.3, y/0.3, z/0.15 − 1)
//   3..4   the goal (x/0.3, y/0.3)
//   5..7   block − effector, per axis / kRelativeScale
//   8..9   goal − effector (x, y) / kRelativeScale
//   10     the block held: +1, else −1
// What the push and pick_place experts decide on, at the precision they need: a 32×32 render
// places the block to about a pixel (1.9 cm), as coarse as the push expert's line tolerance, and
// the effector's height is not in the top-down view. The offsets are the experts' own inputs
// (each move is toward a point set off from the block or the goal), scaled so a centimetre is a
// tenth, which a small policy resolves far better than the difference of two absolute entries.
// Their demonstrations (sim_samples.h) and the environments a policy acts in
// (engine/sim/table_env.h) carry it.
inline constexpr int kObjectStateDim = 11;
inline constexpr double kRelativeScale = 0.1;  // m
void ObjectState(const SimTasks& tasks, int e, float* state);

}  // namespace engine::sim
