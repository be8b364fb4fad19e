#include "engine/sim/instruction.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "common/parse_int.h"

namespace engine::sim {
namespace {

constexpr const char* kWords[] = {"<pad>", "reach", "push", "place", "pick", "block",
                                  "to",    "at",    "the",  "goal",  "and"};
constexpr int kNumWords = sizeof(kWords) / sizeof(kWords[0]);

int Bin(double value, double lo, double hi) {
  const int b = static_cast<int>(std::floor((value - lo) / (hi - lo) * kCoordinateBins));
  return std::clamp(b, 0, kCoordinateBins - 1);
}

std::string Coordinate(char axis, double value) {
  const int b = axis == 'z' ? Bin(value, 0.0, kMaxZ) : Bin(value, -kHalfExtent, kHalfExtent);
  return std::string(1, axis) + std::to_string(b);
}

}  // namespace

int InstructionVocab() { return kNumWords + 3 * kCoordinateBins; }

std::string Instruction(const SimTasks& tasks, int e) {
  const std::string x = Coordinate('x', tasks.goal(e, 0)), y = Coordinate('y', tasks.goal(e, 1));
  switch (tasks.kind()) {
    case TaskKind::kReach:
      return "reach " + x + " " + y + " " + Coordinate('z', tasks.goal(e, 2));
    case TaskKind::kPush:
      return "push block to " + x + " " + y;
    case TaskKind::kPickPlace:
      return "place block at " + x + " " + y;
  }
  return "";
}

common::Result<std::vector<int32_t>> Tokenize(const std::string& text) {
  std::vector<int32_t> ids;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    int id = -1;
    for (int k = 1; k < kNumWords && id < 0; ++k) {
      if (word == kWords[k]) id = k;
    }
    if (id < 0 && word.size() >= 2 && word.size() <= 3 &&
        (word[0] == 'x' || word[0] == 'y' || word[0] == 'z') &&
        std::all_of(word.begin() + 1, word.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      const auto bin = common::ParseInt(std::string_view(word).substr(1), 0, kCoordinateBins - 1);
      const int axis = word[0] - 'x';
      if (bin.ok()) id = kNumWords + axis * kCoordinateBins + *bin;
    }
    if (id < 0) return common::InvalidArgument("\"" + word + "\" is not in the task vocabulary");
    ids.push_back(id);
  }
  return ids;
}

}  // namespace engine::sim
