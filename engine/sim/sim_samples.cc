#include "engine/sim/sim_samples.h"

#include <algorithm>
#include <vector>

#include "common/rng.h"
#include "engine/model/flow_matching.h"
#include "engine/sim/instruction.h"
#include "engine/sim/reach_task.h"
#include "engine/sim/render.h"

namespace engine::sim {
namespace {

constexpr uint64_t kEpisodeSalt = 0x657069736f6465ULL;  // "episode"
constexpr uint64_t kSampleSalt = 0x73616d706c65ULL;     // "sample"
constexpr uint64_t kNoiseSalt = 0x6e6f697365ULL;        // "noise"
// An episode perturbed with σ flips the gripper command on a share kGripFlipPerNoise·σ of its
// steps (7.5% at σ = 0.3).
constexpr double kGripFlipPerNoise = 0.25;

}  // namespace

common::Result<std::unique_ptr<SimDemoSource>> SimDemoSource::Create(TaskKind kind, int action_dim,
                                                                     int horizon, uint64_t seed,
                                                                     int vocab, double demo_noise) {
  if (action_dim != kActionDim && action_dim < 7) {
    return common::InvalidArgument(
        std::string("the simulated task ") + TaskName(kind) + " needs action_dim 4 (dx, dy, dz, " +
            "grip) or at least 7 (robomimic layout), got " + std::to_string(action_dim),
        "engine.model.action_dim");
  }
  if (horizon < 1)
    return common::InvalidArgument("must be at least 1", "engine.model.action_horizon");
  if (vocab < InstructionVocab()) {
    return common::InvalidArgument("the simulated tasks' instructions need a vocab of at least " +
                                   std::to_string(InstructionVocab()));
  }
  if (!(demo_noise >= 0.0 && demo_noise <= 1.0)) {
    return common::InvalidArgument("the demonstrations' noise must be in [0, 1]");
  }
  return std::unique_ptr<SimDemoSource>(
      new SimDemoSource(kind, action_dim, horizon, seed, demo_noise));
}

uint64_t SimDemoSource::EpisodeSeed(uint64_t index) const {
  return common::Rng::ForKey(seed_, kEpisodeSalt, index).NextU64();
}

SimDemoSource::DemoEpisode SimDemoSource::RunEpisode(uint64_t index) const {
  const uint64_t episode = EpisodeSeed(index);
  SimTasks tasks(kind_, 1);
  tasks.Reset(0, episode);
  common::Rng rng = common::Rng::ForKey(episode, kNoiseSalt);
  const double sigma = rng.Uniform(0.0, noise_);  // this episode's perturbation scale
  DemoEpisode d;
  d.executed.reserve(static_cast<size_t>(tasks.max_steps()) * kActionDim);
  d.expert.reserve(d.executed.capacity());
  for (bool done = false; !done;) {
    float a[kActionDim];
    tasks.ExpertAction(0, a);
    d.expert.insert(d.expert.end(), a, a + kActionDim);
    for (int k = 0; k < 3; ++k) a[k] += static_cast<float>(sigma * rng.Normal());
    // The gripper too, now and then: a close on nothing, a dropped block, each with the
    // expert's way out in the labels that follow.
    if (rng.Uniform() < kGripFlipPerNoise * sigma) a[3] = -a[3];
    d.executed.insert(d.executed.end(), a, a + kActionDim);
    tasks.StepEnv(0, a, &done);
  }
  return d;
}

void SimDemoSource::ToModelAction(const float* a, int action_dim, float* out) {
  std::fill(out, out + action_dim, 0.0f);
  out[0] = a[0], out[1] = a[1], out[2] = a[2];
  out[action_dim == kActionDim ? 3 : 6] = a[3];
}

void SimDemoSource::MakeSample(uint64_t index, uint64_t sample_seed,
                               const data::SampleComposition& comp, int vocab,
                               PolicySample* out) const {
  (void)vocab;  // every id is below InstructionVocab(), checked against the model's at Create
  const uint64_t episode = EpisodeSeed(index);
  SimTasks tasks(kind_, 1);
  const DemoEpisode demo = RunEpisode(index);
  const std::vector<float>& actions = demo.executed;
  const int length = static_cast<int>(actions.size() / kActionDim);
  common::Rng rng = common::Rng::ForKey(sample_seed, kSampleSalt);
  const int t = static_cast<int>(rng.NextU64() % static_cast<uint64_t>(length));

  // Replay to step t, observing the frames t − frames + 1 .. t on the way (same actions, same
  // states: the world is deterministic).
  tasks.Reset(0, episode);
  out->frames = comp.frames;
  out->cameras = comp.cameras;
  out->patches_per_camera = comp.patch_tokens_per_camera;
  const int per_camera = comp.patch_tokens_per_camera;
  int grid = 1;
  while (grid * grid < per_camera) ++grid;
  const int side = grid * kPatchSide;
  std::vector<float> image(static_cast<size_t>(side) * side * 3);
  out->patches.resize(static_cast<size_t>(comp.frames) * comp.cameras * per_camera * kPatchDim);
  out->state_tokens = 1;
  out->states.assign(static_cast<size_t>(comp.frames) * kStateDim, 0.0f);
  auto observe = [&](int f) {
    for (int cam = 0; cam < comp.cameras; ++cam) {
      RenderView(tasks, 0, cam, side, image.data());
      CutPatches(image.data(), side, per_camera,
                 out->patches.data() +
                     static_cast<size_t>(f * comp.cameras + cam) * per_camera * kPatchDim);
    }
    Proprioception(tasks, 0, out->states.data() + static_cast<size_t>(f) * kStateDim);
    ObjectState(tasks, 0, out->states.data() + static_cast<size_t>(f) * kStateDim);
  };
  // Frame f shows the state after max(0, t − frames + 1 + f) steps.
  int stepped = 0;
  for (int f = 0; f < comp.frames; ++f) {
    const int at = std::max(0, t - comp.frames + 1 + f);
    for (bool done = false; stepped < at; ++stepped) {
      tasks.StepEnv(0, &actions[static_cast<size_t>(stepped) * kActionDim], &done);
    }
    observe(f);
  }

  // Language.
  const std::string text = Instruction(tasks, 0);
  std::vector<int32_t> ids = Tokenize(text).value();  // words of Instruction are in the vocabulary
  out->language.assign(comp.language_tokens, kPadToken);
  for (int k = 0; k < comp.language_tokens && k < static_cast<int>(ids.size()); ++k) {
    out->language[k] = ids[k];
  }

  // The chunk: steps t .. t + horizon − 1, held after the end.
  out->actions.assign(static_cast<size_t>(horizon_) * action_dim_, 0.0f);
  for (int h = 0; h < horizon_; ++h) {
    const int s = t + h;
    float a[kActionDim] = {0.0f, 0.0f, 0.0f, demo.expert[demo.expert.size() - 1]};
    if (s < length) std::copy_n(&demo.expert[static_cast<size_t>(s) * kActionDim], kActionDim, a);
    ToModelAction(a, action_dim_, out->actions.data() + static_cast<size_t>(h) * action_dim_);
  }
  out->weight = 1.0f;
  DrawFlowNoise(rng, out);
}

}  // namespace engine::sim

namespace engine {

common::Result<std::unique_ptr<DemoSource>> MakeDemoSource(const std::string& dataset,
                                                           int action_dim, int horizon,
                                                           uint64_t seed, int vocab,
                                                           double demo_noise) {
  const std::string prefix = "sim:";
  if (dataset.rfind(prefix, 0) == 0 && dataset != "sim:reach") {
    EMBODY_ASSIGN_OR_RETURN(kind, sim::ParseTaskKind(dataset.substr(prefix.size())));
    EMBODY_ASSIGN_OR_RETURN(source,
                            sim::SimDemoSource::Create(kind, action_dim, horizon, seed, vocab,
                                                       demo_noise));
    return std::unique_ptr<DemoSource>(std::move(source));
  }
  return std::unique_ptr<DemoSource>(std::make_unique<ReachTask>(action_dim, horizon, seed));
}

}  // namespace engine
