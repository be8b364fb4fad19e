// Contact, grasp, gravity and bounds of the table-top world, one case per rule.
#include "engine/sim/table_world.h"

#include <gtest/gtest.h>

namespace engine::sim {
namespace {

// One environment: effector at (x, y, z), one block resting at (bx, by).
TableWorld OneBlock(double x, double y, double z, double bx, double by) {
  TableWorld w(1);
  const double ee[3] = {x, y, z};
  const double block[2] = {bx, by};
  w.ResetEnv(0, ee, 1, block);
  return w;
}

void Act(TableWorld& w, float dx, float dy, float dz, float grip) {
  const float a[kActionDim] = {dx, dy, dz, grip};
  w.StepEnv(0, a);
}

TEST(TableWorldTest, EffectorMovesByMaxStepAndStaysInTheWorkspace) {
  TableWorld w = OneBlock(0.0, 0.0, 0.1, 0.2, 0.2);
  Act(w, 1.0f, -0.5f, 5.0f /* clamped to 1 */, -1.0f);
  EXPECT_DOUBLE_EQ(w.ee(0, 0), kMaxStep);
  EXPECT_DOUBLE_EQ(w.ee(0, 1), -0.5 * kMaxStep);
  EXPECT_DOUBLE_EQ(w.ee(0, 2), 0.1 + kMaxStep);
  for (int i = 0; i < 50; ++i) Act(w, -1.0f, -1.0f, -1.0f, -1.0f);
  EXPECT_DOUBLE_EQ(w.ee(0, 0), -kHalfExtent);
  EXPECT_DOUBLE_EQ(w.ee(0, 1), -kHalfExtent);
  EXPECT_DOUBLE_EQ(w.ee(0, 2), kEffectorMinZ);
}

TEST(TableWorldTest, ContactPushesTheBlockAlongTheApproach) {
  // Effector at table height, 6 cm left of the block, moving right with a closed gripper.
  TableWorld w = OneBlock(0.0, 0.0, kBlockHalf, 0.06, 0.0);
  Act(w, 0.0f, 0.0f, 0.0f, 1.0f);  // close far from the block: nothing grasped
  EXPECT_EQ(w.held(0), -1);
  Act(w, 1.0f, 0.0f, 0.0f, 1.0f);  // ee at 0.03: 0.03 from the block < 0.04 contact distance
  EXPECT_NEAR(w.block(0, 0, 0), kMaxStep + kEffectorRadius + kBlockHalf, 1e-12);
  EXPECT_NEAR(w.block(0, 0, 1), 0.0, 1e-12);
  EXPECT_TRUE(w.BlockResting(0, 0));
}

TEST(TableWorldTest, EffectorPassesAboveWithoutContact) {
  TableWorld w = OneBlock(0.0, 0.0, 2 * kBlockHalf + kEffectorRadius + 0.001, 0.06, 0.0);
  for (int i = 0; i < 4; ++i) Act(w, 1.0f, 0.0f, 0.0f, 1.0f);
  EXPECT_DOUBLE_EQ(w.block(0, 0, 0), 0.06);
}

TEST(TableWorldTest, ClosingNearTheBlockGraspsAndCarriesIt) {
  TableWorld w = OneBlock(0.1, 0.1, kBlockHalf, 0.1 + 0.01, 0.1);  // open fingers straddle it
  Act(w, 0.0f, 0.0f, 0.0f, -1.0f);
  EXPECT_DOUBLE_EQ(w.block(0, 0, 0), 0.11);  // open and above: no push
  Act(w, 0.0f, 0.0f, 0.0f, 1.0f);
  ASSERT_EQ(w.held(0), 0);
  for (int i = 0; i < 3; ++i) Act(w, 0.0f, 1.0f, 1.0f, 1.0f);
  EXPECT_NEAR(w.block(0, 0, 0), 0.11, 1e-12);  // the grasp offset is kept
  EXPECT_NEAR(w.block(0, 0, 1), 0.1 + 3 * kMaxStep, 1e-12);
  EXPECT_NEAR(w.block(0, 0, 2), kBlockHalf + 3 * kMaxStep, 1e-12);
  EXPECT_FALSE(w.BlockResting(0, 0));
}

TEST(TableWorldTest, ClosingAwayFromTheBlockGraspsNothing) {
  TableWorld w = OneBlock(0.1, 0.1, kBlockHalf + kGraspHeight + 0.01, 0.1, 0.1);  // too high
  Act(w, 0.0f, 0.0f, 0.0f, 1.0f);
  EXPECT_EQ(w.held(0), -1);
  TableWorld side = OneBlock(0.1 + kGraspRadius + 0.002, 0.1, 0.2, 0.1, 0.1);  // too far aside
  Act(side, 0.0f, 0.0f, 0.0f, 1.0f);
  EXPECT_EQ(side.held(0), -1);
}

TEST(TableWorldTest, ReleasedBlockFallsUnderGravityToTheTable) {
  TableWorld w = OneBlock(0.0, 0.0, kBlockHalf, 0.0, 0.0);
  Act(w, 0.0f, 0.0f, 0.0f, 1.0f);
  ASSERT_EQ(w.held(0), 0);
  for (int i = 0; i < 5; ++i) Act(w, 0.0f, 0.0f, 1.0f, 1.0f);
  const double lifted = w.block(0, 0, 2);
  ASSERT_NEAR(lifted, kBlockHalf + 5 * kMaxStep, 1e-12);
  Act(w, 0.0f, 0.0f, 0.0f, -1.0f);  // release: one Euler step of free fall
  EXPECT_EQ(w.held(0), -1);
  EXPECT_NEAR(w.block(0, 0, 2), lifted - kGravity * kDt * kDt, 1e-12);
  int steps = 1;
  while (!w.BlockResting(0, 0) && steps < 100) {
    Act(w, 0.0f, 0.0f, 0.0f, -1.0f);
    ++steps;
  }
  EXPECT_TRUE(w.BlockResting(0, 0));
  EXPECT_DOUBLE_EQ(w.block(0, 0, 2), kBlockHalf);
  EXPECT_GT(steps, 1);  // it fell, it did not teleport
  EXPECT_NEAR(w.block(0, 0, 0), 0.0, 1e-12);
}

TEST(TableWorldTest, BlocksDoNotInterpenetrate) {
  TableWorld w(1);
  const double ee[3] = {-0.1, 0.0, kBlockHalf};
  const double blocks[4] = {-0.04, 0.0, 0.02, 0.0};
  w.ResetEnv(0, ee, 2, blocks);
  Act(w, 0.0f, 0.0f, 0.0f, 1.0f);
  for (int i = 0; i < 5; ++i) Act(w, 1.0f, 0.0f, 0.0f, 1.0f);
  const double gap = w.block(0, 1, 0) - w.block(0, 0, 0);
  EXPECT_GE(gap, 2 * kBlockHalf - 1e-9);
  EXPECT_GT(w.block(0, 1, 0), 0.02);  // the first block pushed the second
}

TEST(TableWorldTest, BlocksStayInsideTheWorkspace) {
  TableWorld w = OneBlock(0.2, 0.0, kBlockHalf, 0.25, 0.0);
  Act(w, 0.0f, 0.0f, 0.0f, 1.0f);
  for (int i = 0; i < 10; ++i) Act(w, 1.0f, 0.0f, 0.0f, 1.0f);
  EXPECT_LE(w.block(0, 0, 0), kHalfExtent - kBlockHalf);
}

TEST(TableWorldTest, VectorisedStepEqualsPerEnvironmentSteps) {
  TableWorld many(3), one(1);
  const double ee[3] = {0.0, 0.0, kBlockHalf};
  const double block[2] = {0.05, 0.01};
  for (int e = 0; e < 3; ++e) many.ResetEnv(e, ee, 1, block);
  one.ResetEnv(0, ee, 1, block);
  const float a[3 * kActionDim] = {0.5f, 0.1f, 0.0f,  1.0f, 0.5f, 0.1f,
                                   0.0f, 1.0f, -1.0f, 0.0f, 0.0f, -1.0f};
  for (int i = 0; i < 4; ++i) {
    many.Step(a);
    one.StepEnv(0, a);
  }
  EXPECT_EQ(many.block(0, 0, 0), one.block(0, 0, 0));
  EXPECT_EQ(many.block(1, 0, 1), one.block(0, 0, 1));
  EXPECT_NE(many.ee(2, 0), one.ee(0, 0));
}

}  // namespace
}  // namespace engine::sim
