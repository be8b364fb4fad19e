#include "engine/sim/table_env.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/rng.h"
#include "engine/sim/instruction.h"
#include "engine/sim/render.h"
#include "engine/sim/sim_samples.h"

namespace engine::sim {
namespace {

constexpr uint64_t kTableTag = 0x7461626c65ULL;  // "table"
constexpr int kTablePatchesPerCamera =
    (sim::kImageSide / sim::kPatchSide) * (sim::kImageSide / sim::kPatchSide);

}  // namespace

common::Status TableEnvConfig::Validate() const {
  if (task == sim::TaskKind::kReach) {
    return common::InvalidArgument("TableVecEnv runs push and pick_place; reach is ReachVecEnv");
  }
  if (num_envs < 1) return common::InvalidArgument("num_envs must be ≥ 1");
  if (action_dim != sim::kActionDim && (action_dim < 7 || action_dim > 64)) {
    return common::InvalidArgument("action_dim must be 4 or 7..64 for " +
                                   std::string(sim::TaskName(task)));
  }
  if (cameras < 0 || cameras > 3) return common::InvalidArgument("cameras: 0..3");
  if (episode_steps < 0) return common::InvalidArgument("episode_steps must be ≥ 0");
  if (language_tokens < 5 || language_tokens > 64) {
    return common::InvalidArgument("language_tokens: 5..64 (the instructions have 5 words)");
  }
  if (!(success_bonus >= 0.0)) return common::InvalidArgument("success_bonus must be ≥ 0");
  if (vocab < sim::InstructionVocab()) {
    return common::InvalidArgument("vocab must be ≥ " + std::to_string(sim::InstructionVocab()));
  }
  return common::Status::Ok();
}

common::Result<std::unique_ptr<TableVecEnv>> TableVecEnv::Create(const TableEnvConfig& config) {
  EMBODY_RETURN_IF_ERROR(config.Validate());
  return std::unique_ptr<TableVecEnv>(new TableVecEnv(config));
}

TableVecEnv::TableVecEnv(const TableEnvConfig& config)
    : config_(config), episode_steps_(0), tasks_(config.task, config.num_envs) {
  const int task_max = tasks_.max_steps();
  episode_steps_ = config.episode_steps > 0 ? std::min(config.episode_steps, task_max) : task_max;
  episode_.assign(config.num_envs, 0);
  return_.assign(config.num_envs, 0.0f);
  potential_.assign(config.num_envs, 0.0);
  obs_.resize(config.num_envs);
  image_.resize(static_cast<size_t>(sim::kImageSide) * sim::kImageSide * 3);
  Reset(0);
}

void TableVecEnv::Reset(uint64_t seed) {
  seed_ = seed;
  std::fill(episode_.begin(), episode_.end(), 0);
  for (int e = 0; e < config_.num_envs; ++e) StartEpisode(e);
}

void TableVecEnv::StartEpisode(int e) {
  const uint64_t episode_seed = common::Rng::ForKey(seed_, kTableTag, static_cast<uint64_t>(e),
                                                    static_cast<uint64_t>(episode_[e]))
                                    .NextU64();
  tasks_.Reset(e, episode_seed);
  return_[e] = 0.0f;
  potential_[e] = tasks_.Shaped(e);
  Observe(e);
}

void TableVecEnv::Observe(int e) {
  PolicySample& s = obs_[e];
  const std::vector<int32_t> ids = sim::Tokenize(sim::Instruction(tasks_, e)).value();
  s.language.assign(config_.language_tokens, sim::kPadToken);
  for (int k = 0; k < config_.language_tokens && k < static_cast<int>(ids.size()); ++k) {
    s.language[k] = ids[k];
  }
  s.frames = 1;
  s.cameras = config_.cameras;
  s.patches_per_camera = kTablePatchesPerCamera;
  s.patches.resize(static_cast<size_t>(config_.cameras) * kTablePatchesPerCamera * kPatchDim);
  for (int cam = 0; cam < config_.cameras; ++cam) {
    sim::RenderView(tasks_, e, cam, sim::kImageSide, image_.data());
    sim::CutPatches(
        image_.data(), sim::kImageSide, kTablePatchesPerCamera,
        s.patches.data() + static_cast<size_t>(cam) * kTablePatchesPerCamera * kPatchDim);
  }
  s.states.assign(kStateDim, 0.0f);
  sim::Proprioception(tasks_, e, s.states.data());
  if (config_.privileged_state) sim::ObjectState(tasks_, e, s.states.data());
  s.actions.clear();
  s.noise.clear();
  s.time = 0.0f;
  s.weight = 1.0f;
}

common::Status TableVecEnv::Step(std::span<const float> actions, StepResult* out) {
  const int N = config_.num_envs, n = config_.action_dim;
  EMBODY_RETURN_IF_ERROR(CheckActions(actions, N, n));
  out->Reset(N);
  for (int e = 0; e < N; ++e) {
    const float* a = actions.data() + static_cast<size_t>(e) * n;
    const float sim_action[sim::kActionDim] = {a[0], a[1], a[2], a[n == sim::kActionDim ? 3 : 6]};
    bool task_done = false;
    tasks_.StepEnv(e, sim_action, &task_done);
    const bool success = tasks_.Success(e);
    const double potential = tasks_.Shaped(e);
    double r = potential - potential_[e];
    potential_[e] = potential;
    if (success) r += config_.success_bonus;
    out->reward[e] = static_cast<float>(r);
    return_[e] += static_cast<float>(r);
    if (success || task_done || tasks_.steps(e) >= episode_steps_) {
      out->done[e] = 1;
      out->success[e] = success ? 1 : 0;
      out->episode_return[e] = return_[e];
      out->episode_length[e] = tasks_.steps(e);
      ++episode_[e];
      StartEpisode(e);
    } else {
      Observe(e);
    }
  }
  return common::Status::Ok();
}

std::vector<float> TableVecEnv::ExpertActions() {
  const int n = config_.action_dim;
  std::vector<float> out(static_cast<size_t>(config_.num_envs) * n);
  for (int e = 0; e < config_.num_envs; ++e) {
    float a[sim::kActionDim];
    tasks_.ExpertAction(e, a);
    sim::SimDemoSource::ToModelAction(a, n, out.data() + static_cast<size_t>(e) * n);
  }
  return out;
}

}  // namespace engine::sim
