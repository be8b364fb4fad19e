// Policy samples of the scripted reach task: turns one demonstration of ReachTask (current state
// c, goal g, the expert's action chunk) into the multimodal token sequence the policy transformer
// reads (engine/model/packed_batch.h, PolicySample), with the token composition the loader drew
// for that sample (engine/data/embodied_lengths.h).
//
// Every modality carries signal the policy needs, so behaviour cloning has something to learn:
//   language  the instruction: the goal coordinates, each quantised to kGoalBins bins, one token
//             per coordinate (id = coordinate·kGoalBins + bin), cycling through the coordinates
//             twice; any further tokens are filler words (ids ≥ kFillerBase, random) to ignore.
//   images    each camera renders a 32×32 RGB view (4×4 patches of 8×8) of the workspace:
//             camera 0 looks down (x, y), camera 1 from the front (x, z), camera 2 from the side
//             (y, z); red is a blob at the target position, green a blob at the end effector,
//             blue the gripper state. History frames show the end effector where it was
//             (one expert step back per frame); the last frame is now.
//   state     one token per frame: the controlled coordinates c (zero-padded to kStateDim).
//   actions   the expert chunk, which depends on g − c (and the gripper on the distance).
// Flow-matching noise and time come from the sample's own seed, so the whole sample is a pure
// function of (task seed, global index, sample seed, composition): resumable on any rank count.
#pragma once

#include <cstdint>

#include "engine/data/embodied_lengths.h"
#include "engine/model/packed_batch.h"
#include "engine/sim/reach_task.h"

namespace engine {

inline constexpr int kGoalBins = 16;
inline constexpr int kFillerBase = 256;   // filler word ids: [256, vocab)
inline constexpr int kCameraPixels = 32;  // per side; 4×4 patches of 8×8

// Fills *out (reusing its buffers) with global sample `index` of `task`: composition `comp`
// (language tokens, cameras, frames; patch tokens per camera must be 16), noise and flow time
// drawn from `sample_seed`. vocab bounds the filler ids (≥ kFillerBase + 1).
void MakeReachSample(const ReachTask& task, uint64_t index, uint64_t sample_seed,
                     const data::SampleComposition& comp, int vocab, PolicySample* out);

}  // namespace engine
