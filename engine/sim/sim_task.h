// The built-in simulated embodied tasks on TableWorld, vectorised over N environments:
//
//   reach       move the effector to a goal point in the air; success: within kReachTolerance.
//   push        push the block so its centre lies within kGoalTolerance (horizontally) of a goal
//               on the table; the block stays on the table.
//   pick_place  grasp the block, lift it, carry it and put it down with its centre within
//               kGoalTolerance of a goal on the table; success needs it released and resting,
//               and lifted (held more than kLiftClearance above the table) earlier in the
//               episode, so a block pushed to the goal is not a pick and place.
//
// Reset(e, seed) draws env e's start state and goal from common::Rng::ForKey(seed, kResetSalt,
// task): the effector in the air, the block on the table at least 8 cm from the effector's
// footprint and from the goal (so no episode starts solved or in contact). A seed is an episode's
// identity: the same seed gives the same episode in any environment slot, and as TableWorld::Step
// is deterministic the same seed and actions give bit-identical trajectories.
//
// Reward per step (documented in docs/sim.md), distances in metres:
//   reach       −|ee − goal|
//   push        −|block_xy − goal_xy| − 0.5·|ee − block|
//   pick_place  −|block_xy − goal_xy| − 0.5·|ee − block| + 0.5·[block held]
// plus kSuccessBonus on the step the success predicate first holds; an episode ends there or
// at max_steps() (a truncation, not a failure signal of its own).
//
// Expert (ExpertAction): a function of the current state alone (effector, gripper, block, whether
// it is held, goal), no memory, so one frame of observation determines its action:
//   reach       a saturated proportional move to the goal.
//   push        low behind the block (within kRealign of the line goal→block): push along the
//               line, steering onto it; above the point behind the block: descend to it; too low
//               to travel: rise; otherwise travel at kSafeZ to above the point behind the block.
//   pick_place  holding: above the goal, lower the block to the table and open once it rests;
//               else lift and carry above the goal. Not holding: above the block, descend with the
//               fingers open and close once level with it; else rise and travel above it.
// Each phase is read off the geometry with margins of a centimetre or two, and each move steers
// back to its line, so the expert recovers from perturbed states (sim_samples.h perturbs its
// demonstrations) and a policy slightly off its path is shown the way back.
//
// Step latency (optional, SetLatency): StepEnv spends env e's draw for its n-th step since
// construction, StepLatency::Sample(e, n) — an environment stepped on its own thread takes its
// own time; Step, which steps every environment together as a synchronous vectorised simulator
// would, spends the largest draw of the environments it steps once — the batch waits for its
// slowest member.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/sim/step_latency.h"
#include "engine/sim/table_world.h"

namespace engine::sim {

enum class TaskKind { kReach, kPush, kPickPlace };

// "reach", "push", "pick_place".
const char* TaskName(TaskKind kind);
common::Result<TaskKind> ParseTaskKind(const std::string& name);

inline constexpr double kReachTolerance = 0.03;  // m
inline constexpr double kGoalTolerance = 0.04;   // m
inline constexpr double kSuccessBonus = 10.0;
inline constexpr double kSafeZ = 0.12;     // m: the expert's travel height, clear of any block
// m: pick_place counts its block as picked once it has been held with its bottom this far above
// the table; only then can putting it down succeed (pushing it to the goal does not).
inline constexpr double kLiftClearance = 0.02;
inline constexpr double kRealign = 0.02;   // m: the push expert's lateral tolerance

class SimTasks {
 public:
  SimTasks(TaskKind kind, int num_envs);

  TaskKind kind() const { return kind_; }
  int num_envs() const { return world_.num_envs(); }
  int max_steps() const;
  const TableWorld& world() const { return world_; }
  TableWorld& mutable_world() { return world_; }

  // Starts a new episode in env e from `seed`.
  void Reset(int e, uint64_t seed);
  // Steps every environment with actions (num_envs, kActionDim); writes each env's reward and
  // whether its episode ended (success or max_steps). A finished env is stepped no further
  // (its reward is 0) until Reset.
  void Step(std::span<const float> actions, std::span<double> rewards, std::span<uint8_t> done);
  // Steps env e alone; returns its reward.
  double StepEnv(int e, const float* action, bool* done);

  bool Success(int e) const;
  int steps(int e) const { return steps_[e]; }
  // Goal point (reach) or goal centre on the table (z = 0 for push and pick_place).
  double goal(int e, int axis) const { return goal_[3 * e + axis]; }

  // Steps take simulated time from `latency`, spent by `mode` (see above).
  void SetLatency(const StepLatency& latency, StepLatency::WaitMode mode);
  // Seconds the last step of env e was given (0 without a latency model).
  double last_latency(int e) const { return last_latency_[e]; }

  // The scripted expert's action (kActionDim floats) for env e's current state: a function of
  // that state alone (no memory), so it may be asked any number of times, for any state.
  void ExpertAction(int e, float* action) const;

  // The shaped per-step value of env e's current state (the reward above without the success
  // bonus): RL environments use it as a potential (engine/sim/table_env.h).
  double Shaped(int e) const;

 private:
  double Advance(int e, const float* action, bool* done);
  void ExpertReach(int e, float* a) const;
  void ExpertPush(int e, float* a) const;
  void ExpertPickPlace(int e, float* a) const;

  TaskKind kind_;
  TableWorld world_;
  std::vector<double> goal_;  // (N, 3)
  std::vector<int> steps_;    // (N)
  std::vector<uint8_t> finished_;
  std::vector<uint8_t> lifted_;  // (N): pick_place's block has been picked this episode
  std::optional<StepLatency> latency_;
  StepLatency::WaitMode wait_mode_ = StepLatency::WaitMode::kSleep;
  std::vector<uint64_t> stepped_;     // (N): steps taken in each slot, the latency key
  std::vector<double> last_latency_;  // (N)
};

}  // namespace engine::sim
