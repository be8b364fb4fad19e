#include "engine/sim/sim_task.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "common/rng.h"

namespace engine::sim {
namespace {

constexpr uint64_t kResetSalt = 0x7265736574ULL;  // "reset"
constexpr double kStartSeparation = 0.08;         // m
constexpr double kArrived = 1e-3;                 // m: the expert's "there"
constexpr double kContact = kEffectorRadius + kBlockHalf;
constexpr double kPushStandoff = kContact + 0.01;  // m: where the push expert descends, behind
constexpr double kApproach = 0.02;  // m: horizontal slack: descend behind, push reach, release
constexpr double kLow = 0.01;       // m: "level with", "centred on" (the grasp); the funnel tip
constexpr double kPushZ = kBlockHalf + 0.02;  // m: below this, the push expert pushes
// m: below this the push expert rises before it travels; above it a straight path toward the travel
// height clears a block on the table (top plus effector radius, 6.5 cm) by 2.5 cm.
constexpr double kTravelZ = 0.09;
constexpr double kFunnelSlope = 2.0;  // m of height per m of horizontal distance

double Norm(double x, double y, double z = 0.0) { return std::sqrt(x * x + y * y + z * z); }

// A move toward `target` (3) scaled as a whole so no component exceeds 1: the effector goes
// straight at it (a per-axis clamp would bend the path, and a bent push loses the block).
// Returns the remaining distance.
double MoveToward(const TableWorld& w, int e, const double* target, float* a) {
  double d[3], m = 0.0;
  for (int k = 0; k < 3; ++k) {
    d[k] = (target[k] - w.ee(e, k)) / kMaxStep;
    m = std::max(m, std::abs(d[k]));
  }
  const double s = m > 1.0 ? 1.0 / m : 1.0;
  for (int k = 0; k < 3; ++k) a[k] = static_cast<float>(d[k] * s);
  return Norm(target[0] - w.ee(e, 0), target[1] - w.ee(e, 1), target[2] - w.ee(e, 2));
}

// A move down a funnel onto (x, y, z): the height aimed at rises with the horizontal distance
// d, z + kFunnelSlope·(d − kLow), up to kSafeZ, so the effector comes in high and descends as it
// closes in, clearing the block's top (at d = 4 cm, the block's contact reach, the funnel is
// 6 cm above its centre). Below the funnel it rises first: the horizontal move shrinks to
// nothing as the effector falls kLow to 3·kLow under it. The action is a continuous function of
// the state, without a phase boundary for a cloned policy to smear.
void FunnelToward(const TableWorld& w, int e, double x, double y, double z, float* a) {
  const double ex = w.ee(e, 0), ey = w.ee(e, 1), ez = w.ee(e, 2);
  const double d = Norm(x - ex, y - ey);
  const double aim = std::clamp(z + kFunnelSlope * (d - kLow), z, std::max(z, kSafeZ));
  const double xy = std::clamp(1.0 - (aim - ez - kLow) / (2 * kLow), 0.0, 1.0);
  const double target[3] = {ex + xy * (x - ex), ey + xy * (y - ey), aim};
  MoveToward(w, e, target, a);
}

}  // namespace

const char* TaskName(TaskKind kind) {
  switch (kind) {
    case TaskKind::kReach:
      return "reach";
    case TaskKind::kPush:
      return "push";
    case TaskKind::kPickPlace:
      return "pick_place";
  }
  return "?";
}

common::Result<TaskKind> ParseTaskKind(const std::string& name) {
  for (TaskKind k : {TaskKind::kReach, TaskKind::kPush, TaskKind::kPickPlace}) {
    if (name == TaskName(k)) return k;
  }
  return common::InvalidArgument("unknown simulated task \"" + name +
                                 "\"; the tasks are reach, push and pick_place");
}

SimTasks::SimTasks(TaskKind kind, int num_envs)
    : kind_(kind),
      world_(num_envs),
      goal_(static_cast<size_t>(num_envs) * 3, 0.0),
      steps_(num_envs, 0),
      finished_(num_envs, 0),
      lifted_(num_envs, 0),
      stepped_(num_envs, 0),
      last_latency_(num_envs, 0.0) {}

void SimTasks::SetLatency(const StepLatency& latency, StepLatency::WaitMode mode) {
  latency_ = latency;
  wait_mode_ = mode;
}

int SimTasks::max_steps() const {
  switch (kind_) {
    case TaskKind::kReach:
      return 40;
    case TaskKind::kPush:
      return 150;
    case TaskKind::kPickPlace:
      return 100;
  }
  return 0;
}

void SimTasks::Reset(int e, uint64_t seed) {
  common::Rng rng = common::Rng::ForKey(seed, kResetSalt, static_cast<uint64_t>(kind_));
  double ee[3] = {rng.Uniform(-0.2, 0.2), rng.Uniform(-0.2, 0.2), rng.Uniform(0.08, 0.2)};
  double* g = &goal_[3 * static_cast<size_t>(e)];
  double block[2] = {0.0, 0.0};
  int blocks = 0;
  if (kind_ == TaskKind::kReach) {
    // Rejection sampling with a bounded number of draws; the last draw stands (the bound is
    // never reached in practice: a draw fails with probability < 5%).
    for (int tries = 0; tries < 64; ++tries) {
      g[0] = rng.Uniform(-0.2, 0.2), g[1] = rng.Uniform(-0.2, 0.2), g[2] = rng.Uniform(0.05, 0.25);
      if (Norm(g[0] - ee[0], g[1] - ee[1], g[2] - ee[2]) >= kStartSeparation) break;
    }
  } else {
    blocks = 1;
    for (int tries = 0; tries < 64; ++tries) {
      block[0] = rng.Uniform(-0.18, 0.18), block[1] = rng.Uniform(-0.18, 0.18);
      g[0] = rng.Uniform(-0.18, 0.18), g[1] = rng.Uniform(-0.18, 0.18), g[2] = 0.0;
      if (Norm(g[0] - block[0], g[1] - block[1]) >= kStartSeparation &&
          Norm(ee[0] - block[0], ee[1] - block[1]) >= kStartSeparation) {
        break;
      }
    }
  }
  world_.ResetEnv(e, ee, blocks, block);
  steps_[e] = 0;
  finished_[e] = 0;
  lifted_[e] = 0;
}

bool SimTasks::Success(int e) const {
  const TableWorld& w = world_;
  const double* g = &goal_[3 * static_cast<size_t>(e)];
  switch (kind_) {
    case TaskKind::kReach:
      return Norm(w.ee(e, 0) - g[0], w.ee(e, 1) - g[1], w.ee(e, 2) - g[2]) < kReachTolerance;
    case TaskKind::kPush:
    case TaskKind::kPickPlace: {
      const bool near = Norm(w.block(e, 0, 0) - g[0], w.block(e, 0, 1) - g[1]) < kGoalTolerance;
      if (kind_ == TaskKind::kPush) return near;
      return near && lifted_[e] != 0 && w.BlockResting(e, 0);
    }
  }
  return false;
}

double SimTasks::Shaped(int e) const {
  const TableWorld& w = world_;
  const double* g = &goal_[3 * static_cast<size_t>(e)];
  if (kind_ == TaskKind::kReach) {
    return -Norm(w.ee(e, 0) - g[0], w.ee(e, 1) - g[1], w.ee(e, 2) - g[2]);
  }
  const double to_goal = Norm(w.block(e, 0, 0) - g[0], w.block(e, 0, 1) - g[1]);
  const double to_block = Norm(w.ee(e, 0) - w.block(e, 0, 0), w.ee(e, 1) - w.block(e, 0, 1),
                               w.ee(e, 2) - w.block(e, 0, 2));
  double r = -to_goal - 0.5 * to_block;
  if (kind_ == TaskKind::kPickPlace && w.held(e) == 0) r += 0.5;
  return r;
}

double SimTasks::Advance(int e, const float* action, bool* done) {
  last_latency_[e] = 0.0;
  if (finished_[e] != 0) {
    *done = true;
    return 0.0;
  }
  if (latency_.has_value()) last_latency_[e] = latency_->Sample(e, stepped_[e]);
  ++stepped_[e];
  world_.StepEnv(e, action);
  ++steps_[e];
  if (kind_ == TaskKind::kPickPlace && world_.held(e) == 0 &&
      world_.block(e, 0, 2) - kBlockHalf > kLiftClearance) {
    lifted_[e] = 1;
  }
  double r = Shaped(e);
  const bool success = Success(e);
  if (success) r += kSuccessBonus;
  if (success || steps_[e] >= max_steps()) finished_[e] = 1;
  *done = finished_[e] != 0;
  return r;
}

double SimTasks::StepEnv(int e, const float* action, bool* done) {
  const double r = Advance(e, action, done);
  StepLatency::Wait(last_latency_[e], wait_mode_);
  return r;
}

void SimTasks::Step(std::span<const float> actions, std::span<double> rewards,
                    std::span<uint8_t> done) {
  const int n = num_envs();
  if (actions.size() != static_cast<size_t>(n) * kActionDim || rewards.size() != size_t(n) ||
      done.size() != size_t(n)) {
    std::fprintf(stderr, "SimTasks::Step: spans must hold num_envs entries (actions ×%d)\n",
                 kActionDim);
    std::abort();
  }
  double slowest = 0.0;
  for (int e = 0; e < n; ++e) {
    bool d = false;
    rewards[e] = Advance(e, actions.data() + static_cast<size_t>(e) * kActionDim, &d);
    done[e] = d ? 1 : 0;
    slowest = std::max(slowest, last_latency_[e]);
  }
  StepLatency::Wait(slowest, wait_mode_);
}

void SimTasks::ExpertAction(int e, float* a) const {
  std::fill(a, a + kActionDim, 0.0f);
  switch (kind_) {
    case TaskKind::kReach:
      ExpertReach(e, a);
      break;
    case TaskKind::kPush:
      ExpertPush(e, a);
      break;
    case TaskKind::kPickPlace:
      ExpertPickPlace(e, a);
      break;
  }
}

void SimTasks::ExpertReach(int e, float* a) const {
  MoveToward(world_, e, &goal_[3 * static_cast<size_t>(e)], a);
  a[3] = -1.0f;
}

// The table experts are reactive: each step's action is a function of what the observation
// shows (effector, gripper, block, whether it is held, goal), with the phase read off the
// geometry rather than remembered, so a policy that sees one frame can clone them. Their tests
// are generous (kApproach, kTravelZ) and they correct as they go (a descent or a push steers back
// to its line; pick_place's funnels have no phase boundary at all), so a policy a centimetre off
// the expert's path gets the action that brings it back rather than one of another phase.

void SimTasks::ExpertPush(int e, float* a) const {
  const TableWorld& w = world_;
  const double* g = &goal_[3 * static_cast<size_t>(e)];
  a[3] = 1.0f;  // closed throughout: a closed gripper pushes instead of straddling
  if (Success(e)) return;
  const double bx = w.block(e, 0, 0), by = w.block(e, 0, 1);
  const double ex = w.ee(e, 0), ey = w.ee(e, 1), ez = w.ee(e, 2);
  const double gl = std::max(1e-9, Norm(g[0] - bx, g[1] - by));
  const double ux = (g[0] - bx) / gl, uy = (g[1] - by) / gl;  // the push direction
  const double behind[3] = {bx - ux * kPushStandoff, by - uy * kPushStandoff, kBlockHalf};
  // Where the block lies as seen from the effector: across the push line and along it.
  const double vx = bx - ex, vy = by - ey;
  const double lateral = std::abs(ux * vy - uy * vx);
  const double along = ux * vx + uy * vy;
  if (ez < kPushZ && lateral <= kRealign && along > 0.0 && along <= kPushStandoff + kApproach) {
    // Low and behind the block: push along the line, steering onto it, one step's worth past
    // the contact point (less near the goal, so the block stops there).
    const double step = std::min(kMaxStep, gl);
    const double to[3] = {bx - ux * (kContact - step), by - uy * (kContact - step), kBlockHalf};
    MoveToward(w, e, to, a);
  } else if (Norm(behind[0] - ex, behind[1] - ey) < kApproach) {
    MoveToward(w, e, behind, a);  // above the point behind the block: down to it
  } else if (ez < kTravelZ) {
    const double up[3] = {ex, ey, kSafeZ};  // too low to travel: rise clear of the block
    MoveToward(w, e, up, a);
  } else {
    const double over[3] = {behind[0], behind[1], kSafeZ};  // travel above the point behind it
    MoveToward(w, e, over, a);
  }
}

void SimTasks::ExpertPickPlace(int e, float* a) const {
  const TableWorld& w = world_;
  const double* g = &goal_[3 * static_cast<size_t>(e)];
  const double bx = w.block(e, 0, 0), by = w.block(e, 0, 1), bz = w.block(e, 0, 2);
  const double ex = w.ee(e, 0), ey = w.ee(e, 1), ez = w.ee(e, 2);
  if (w.held(e) == 0) {
    a[3] = 1.0f;
    if (Norm(g[0] - ex, g[1] - ey) < kApproach && bz <= kBlockHalf + kArrived) {
      a[3] = -1.0f;  // the block sits on the table by the goal: let go
      return;
    }
    // Down the funnel above the goal to where the block touches the table.
    FunnelToward(w, e, g[0], g[1], ez - (bz - kBlockHalf), a);
    return;
  }
  a[3] = -1.0f;
  if (w.gripper_closed(e)) {  // closed on nothing: open and rise
    const double up[3] = {ex, ey, kSafeZ};
    MoveToward(w, e, up, a);
    return;
  }
  // Down the funnel above the block, fingers open (they straddle it within kGraspRadius), and
  // close once level with it and centred, well inside the grasp's reach.
  FunnelToward(w, e, bx, by, bz, a);
  if (std::abs(ez - bz) < kLow && Norm(bx - ex, by - ey) < kLow) a[3] = 1.0f;
}

}  // namespace engine::sim
