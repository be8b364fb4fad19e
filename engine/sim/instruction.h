// Language instructions of the simulated tasks and the fixed small vocabulary that tokenises them.
//
// The policy transformer embeds token ids (PolicyConfig::vocab, 512 by default) but ships no
// tokeniser, so the simulated tasks bring their own: a closed word list, one id per word, that
// covers every instruction they write. Goals are named by coordinate words, each axis quantised
// into kCoordinateBins bins over the workspace (x and y over [−0.3, 0.3] m, z over [0, 0.3] m):
//   reach       "reach x7 y12 z3"
//   push        "push block to x7 y12"
//   pick_place  "place block at x7 y12"
// Ids: 0 "<pad>", then the words, then x0..x15, y0..y15, z0..z15; all below kInstructionVocab.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/sim/sim_task.h"

namespace engine::sim {

inline constexpr int kCoordinateBins = 16;
inline constexpr int kPadToken = 0;
// Ids in use are [0, kInstructionVocab); the model's vocab must be at least this.
int InstructionVocab();

// The instruction for env e's task and goal.
std::string Instruction(const SimTasks& tasks, int e);
// Word ids of `text` (words separated by single spaces); an unknown word is invalid_argument.
common::Result<std::vector<int32_t>> Tokenize(const std::string& text);

}  // namespace engine::sim
