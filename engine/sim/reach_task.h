// ReachTask ("sim:reach"): a built-in scripted task that produces synthetic embodied
// demonstrations for behaviour cloning.
//
// A robot arm under operational-space control, with the action convention of robomimic and
// LIBERO: with action_dim = 7 an action is (dx, dy, dz, droll, dpitch, dyaw, gripper). The robot
// has action_dim controlled coordinates c:
//   c[0,3)  end-effector position in a 1 m workspace box centred on the origin
//   c[3,6)  end-effector orientation (roll, pitch, yaw), radians
//   c[6]    gripper, -1 open .. +1 closed
//   c[7,n)  auxiliary joints (e.g. torso, base), radians
// (with action_dim < 7, the first action_dim of these). Each episode draws a start state and a
// goal g: a target pose to reach and grasp at, and goal values of the auxiliary joints.
//
// The scripted expert is a proportional controller: each continuous coordinate moves by
// kMaxStep * a_j with a_j = clamp(kGain * (g_j - c_j) / kMaxStep, -1, 1); the gripper closes
// (a = +1) once the end effector is within kGraspRadius of the target position, else stays open
// (-1). A sample is one observation and the expert's action chunk for the next `horizon` control
// steps, produced by rolling the controller forward, so a chunk shows the approach, the slowdown
// near the goal and the grasp.
//
// Observation (ObsDim = 2 * action_dim + kDistractors floats): c (action_dim), g (action_dim;
// the gripper's entry is +1, "grasp"), then distractors: standard normal noise the policy must
// learn to ignore. Every action lies in [-1, 1].
//
// Samples are a pure function of (seed, global sample index) (SampleAt): the trainer's data stream
// is one sequence of samples that ranks split between them, so a run can be replayed exactly and
// resumed on a different number of ranks from the same position. The older (seed, rank, step,
// index) keying (Sample) is kept for callers that want per-rank streams. Not a physics simulator:
// no dynamics, joint limits or collisions.
#pragma once

#include <cstdint>

#include "engine/sim/demo_source.h"

namespace engine {

class ReachTask : public DemoSource {
 public:
  static constexpr int kDistractors = 2;
  static constexpr int kGripper = 6;            // index of the gripper coordinate
  static constexpr double kMaxStep = 0.05;      // m or rad per control step at |a| = 1
  static constexpr double kGain = 0.2;          // fraction of the error closed per step
  static constexpr double kGraspRadius = 0.05;  // m

  ReachTask(int action_dim, int horizon, uint64_t seed);

  static int ObsDim(int action_dim) { return 2 * action_dim + kDistractors; }
  int obs_dim() const { return ObsDim(action_dim_); }
  int action_dim() const { return action_dim_; }
  int horizon() const { return horizon_; }
  // Floats in one action chunk: horizon * action_dim.
  int chunk_dim() const { return horizon_ * action_dim_; }

  // Draws `batch` samples for (rank, step).
  // obs: (batch, obs_dim), chunks: (batch, horizon, action_dim); both row-major, caller-owned.
  void Sample(uint64_t rank, uint64_t step, int batch, float* obs, float* chunks) const;
  // Draws the sample with global index `index` of this task's stream.
  // obs: (obs_dim), chunk: (horizon, action_dim); caller-owned.
  void SampleAt(uint64_t index, float* obs, float* chunk) const;

  // The policy sample of global index `index` (MakeReachSample, engine/sim/reach_samples.h).
  void MakeSample(uint64_t index, uint64_t sample_seed, const data::SampleComposition& comp,
                  int vocab, PolicySample* out) const override;

  // The expert's action (action_dim) in state c (action_dim) toward goal g (action_dim).
  void ExpertAction(const double* c, const double* g, double* action) const;
  // Applies one action to state c in place (what the controller does with it).
  void ApplyAction(const double* action, double* c) const;
  // Distance from the end effector to the target position (over the position coordinates present).
  double PositionError(const double* c, const double* g) const;

 private:
  void SampleFrom(uint64_t key_b, uint64_t key_c, uint64_t key_d, float* obs, float* chunk) const;

  int action_dim_;
  int horizon_;
  uint64_t seed_;
};

}  // namespace engine
