// Behaviour-cloning samples of the table-top tasks ("sim:push", "sim:pick_place", and reach):
// one state of a scripted-expert episode, observed in the policy's modalities, with the expert's
// next action chunk.
//
// Sample `index` of a source with seed s: the episode Reset(ForKey(s, kEpisodeSalt, index)) is
// rolled out to its end (success or max_steps) by the expert perturbed DART-style: each step the
// expert's motion plus Gaussian noise of σ (drawn per episode from [0, demo_noise], in action
// units), and now and then a flipped gripper command, so the demonstrations visit the states a
// cloned policy drifts into and show the expert's way back from each (the expert is a function
// of the state, engine/sim/sim_task.h). A step t is drawn uniformly from the episode (from the
// sample's own stream), and the sample shows:
//   language  the instruction (engine/sim/instruction.h), padded with <pad> to the composition's
//             language tokens (cut if shorter, which the built-in compositions never are: ≥ 5)
//   images    per frame, cameras 0..cameras−1 (engine/sim/render.h), 32×32 → 16 patches each;
//             frames are steps t − frames + 1 .. t (the episode's first state before step 0)
//   state     per frame, the proprioception (effector, gripper) and the object state (block,
//             goal, their offsets from the effector, the block held; render.h), zero-padded to
//             kStateDim
//   actions   the expert's own (unperturbed) actions in the states of steps t .. t + horizon − 1;
//             after the episode's end, a hold (no motion, the last gripper command)
// Action layout for the model's action_dim: 4 → (dx, dy, dz, grip); ≥ 7 → (dx, dy, dz, 0, 0, 0,
// grip, 0 ...), the robomimic convention ReachTask uses. Other sizes are refused.
#pragma once

#include <cstdint>
#include <vector>

#include "api/job_spec.h"
#include "engine/sim/demo_source.h"
#include "engine/sim/sim_task.h"

namespace engine::sim {

class SimDemoSource : public DemoSource {
 public:
  // Validates action_dim (4 or ≥ 7), horizon ≥ 1, vocab ≥ InstructionVocab() and demo_noise in
  // [0, 1]: the largest perturbation of the demonstrations, an episode's motion being the
  // expert's plus Gaussian noise of standard deviation σ (in action units, 1 = 3 cm) drawn per
  // episode uniformly from [0, demo_noise]; the labels stay the expert's own action in every
  // state reached. engine.data.demo_noise sets it per job.
  static common::Result<std::unique_ptr<SimDemoSource>> Create(
      TaskKind kind, int action_dim, int horizon, uint64_t seed, int vocab,
      double demo_noise = api::kDefaultDemoNoise);

  void MakeSample(uint64_t index, uint64_t sample_seed, const data::SampleComposition& comp,
                  int vocab, PolicySample* out) const override;

  // The episode seed of sample `index`.
  uint64_t EpisodeSeed(uint64_t index) const;

  // Sample `index`'s episode to its end: the actions stepped (the expert's, perturbed) and the
  // expert's own action in each state reached, (steps, kActionDim) each.
  struct DemoEpisode {
    std::vector<float> executed;
    std::vector<float> expert;
  };
  DemoEpisode RunEpisode(uint64_t index) const;
  // Writes the model-layout action (action_dim floats) for a sim action (kActionDim floats).
  static void ToModelAction(const float* sim_action, int action_dim, float* out);

 private:
  SimDemoSource(TaskKind kind, int action_dim, int horizon, uint64_t seed, double noise)
      : kind_(kind), action_dim_(action_dim), horizon_(horizon), seed_(seed), noise_(noise) {}

  TaskKind kind_;
  int action_dim_;
  int horizon_;
  uint64_t seed_;
  double noise_;
};

}  // namespace engine::sim
