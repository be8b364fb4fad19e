// Rendering: shapes land on the pixels their positions say, patches cut the image the way the
// model reads them, and the instruction tokenises.
#include "engine/sim/render.h"

#include <vector>

#include <gtest/gtest.h>

#include "engine/model/packed_batch.h"
#include "engine/sim/instruction.h"

namespace engine::sim {
namespace {

constexpr int kSide = kImageSide;

float At(const std::vector<float>& image, int row, int col, int ch) {
  return image[(static_cast<size_t>(row) * kSide + col) * 3 + ch];
}

// Pixel index of world coordinate v on a 0.6 m axis starting at lo.
int Pixel(double v, double lo) { return static_cast<int>((v - lo) / (2 * kHalfExtent) * kSide); }

TEST(RenderTest, BlockAppearsInTheRightPixelsFromAboveAndFromTheFront) {
  SimTasks tasks(TaskKind::kPush, 1);
  tasks.Reset(0, 3);
  TableWorld& w = tasks.mutable_world();
  w.SetBlock(0, 0, 0.1, -0.1, kBlockHalf);
  w.SetEffector(0, -0.2, 0.2, 0.2);
  std::vector<float> image(kSide * kSide * 3);

  RenderView(tasks, 0, /*camera=*/0, kSide, image.data());
  int lit = 0;
  for (int row = 0; row < kSide; ++row) {
    for (int col = 0; col < kSide; ++col) {
      if (At(image, row, col, 0) > 0.0f) {
        ++lit;
        // Every lit pixel's centre is inside the block's footprint.
        const double x = -kHalfExtent + (col + 0.5) * 2 * kHalfExtent / kSide;
        const double y = -kHalfExtent + (row + 0.5) * 2 * kHalfExtent / kSide;
        EXPECT_LE(std::abs(x - 0.1), kBlockHalf);
        EXPECT_LE(std::abs(y + 0.1), kBlockHalf);
      }
    }
  }
  EXPECT_GE(lit, 4);  // 5 cm of 1.875 cm pixels: 2-3 pixels a side
  EXPECT_LE(lit, 9);
  EXPECT_EQ(At(image, Pixel(-0.1, -kHalfExtent), Pixel(0.1, -kHalfExtent), 0), 0.5f);
  EXPECT_EQ(At(image, Pixel(0.2, -kHalfExtent), Pixel(-0.2, -kHalfExtent), 2), 0.5f);  // open
  EXPECT_EQ(
      At(image, Pixel(tasks.goal(0, 1), -kHalfExtent), Pixel(tasks.goal(0, 0), -kHalfExtent), 1),
      1.0f);

  // Front camera: columns are x, rows are z from the top; the block sits on the bottom rows.
  RenderView(tasks, 0, /*camera=*/1, kSide, image.data());
  const int col = Pixel(0.1, -kHalfExtent);
  EXPECT_EQ(At(image, kSide - 1, col, 0), 0.5f);
  EXPECT_EQ(At(image, 0, col, 0), 0.0f);
  EXPECT_EQ(At(image, kSide - 1, Pixel(-0.1, -kHalfExtent), 0), 0.0f);
}

TEST(RenderTest, PatchesAreRowMajorEightByEightTiles) {
  std::vector<float> image(kSide * kSide * 3);
  for (size_t i = 0; i < image.size(); ++i) image[i] = static_cast<float>(i);
  std::vector<float> patches(16 * kPatchDim);
  CutPatches(image.data(), kSide, 16, patches.data());
  // Patch 5 is grid row 1, column 1: its pixel (2, 3) is image pixel (10, 11).
  const float* p = patches.data() + 5 * kPatchDim;
  for (int ch = 0; ch < 3; ++ch) {
    EXPECT_EQ(p[(2 * 8 + 3) * 3 + ch], image[(10 * kSide + 11) * 3 + ch]);
  }
}

TEST(RenderTest, InstructionNamesTaskAndGoalInTheFixedVocabulary) {
  SimTasks tasks(TaskKind::kPickPlace, 1);
  tasks.Reset(0, 9);
  const std::string text = Instruction(tasks, 0);
  EXPECT_EQ(text.rfind("place block at x", 0), 0u) << text;
  auto ids = Tokenize(text);
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  EXPECT_EQ(ids->size(), 5u);
  for (int32_t id : *ids) {
    EXPECT_GT(id, kPadToken);
    EXPECT_LT(id, InstructionVocab());
  }
  EXPECT_EQ(Tokenize("reach x3 y4 z15")->size(), 4u);
  EXPECT_FALSE(Tokenize("reach x16").ok());
  EXPECT_FALSE(Tokenize("fly to x3").ok());
  // Different goal bins, different tokens.
  EXPECT_NE(*Tokenize("push block to x3 y4"), *Tokenize("push block to x3 y5"));
}

}  // namespace
}  // namespace engine::sim
