#include "engine/checkpoint.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "common/file_util.h"

namespace engine {
namespace {

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() /
        ("embody-ckpt-test-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
         "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static CheckpointData Sample(int64_t step) {
    CheckpointData d;
    d.step = step;
    d.adam_t = step;
    d.config = {{"engine", {{"seed", 3}}}, {"model", {{"d_model", 8}}}};
    for (int i = 0; i < 100; ++i) {
      d.params.push_back(0.01f * i - 0.3f);
      d.adam_m.push_back(1e-3f * i);
      d.adam_v.push_back(1e-6f * i);
    }
    return d;
  }

  std::filesystem::path dir_;
};

TEST_F(CheckpointTest, RoundTrip) {
  CheckpointData d = Sample(42);
  std::string path = CheckpointPath(dir_.string(), 42);
  auto bytes = SaveCheckpoint(path, d);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_EQ(*bytes, static_cast<int64_t>(std::filesystem::file_size(path)));
  auto loaded = LoadCheckpoint(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->step, 42);
  EXPECT_EQ(loaded->adam_t, 42);
  EXPECT_EQ(loaded->config, d.config);
  EXPECT_EQ(loaded->params, d.params);
  EXPECT_EQ(loaded->adam_m, d.adam_m);
  EXPECT_EQ(loaded->adam_v, d.adam_v);
}

TEST_F(CheckpointTest, DetectsCorruptionAndTruncation) {
  std::string bytes = EncodeCheckpoint(Sample(1));
  ASSERT_TRUE(DecodeCheckpoint(bytes).ok());
  std::string flipped = bytes;
  flipped[flipped.size() / 2] ^= 0x10;
  EXPECT_FALSE(DecodeCheckpoint(flipped).ok());
  EXPECT_FALSE(DecodeCheckpoint(bytes.substr(0, bytes.size() - 4)).ok());
  EXPECT_FALSE(DecodeCheckpoint("not a checkpoint").ok());
  std::string bad_magic = bytes;
  bad_magic[0] = 'X';
  EXPECT_FALSE(DecodeCheckpoint(bad_magic).ok());
  EXPECT_FALSE(LoadCheckpoint((dir_ / "missing.ckpt").string()).ok());
}

TEST_F(CheckpointTest, PruneKeepsNewest) {
  for (int64_t s : {5, 10, 100, 15}) {
    ASSERT_TRUE(SaveCheckpoint(CheckpointPath(dir_.string(), s), Sample(s)).ok());
  }
  ASSERT_TRUE(common::WriteFileAtomic((dir_ / "notes.txt").string(), "keep me").ok());
  ASSERT_TRUE(common::WriteFileAtomic((dir_ / "step-x.ckpt").string(), "not ours").ok());
  ASSERT_TRUE(PruneCheckpoints(dir_.string(), 2).ok());
  auto steps = ListCheckpointSteps(dir_.string());
  ASSERT_TRUE(steps.ok());
  EXPECT_EQ(*steps, (std::vector<int64_t>{15, 100}));  // numeric order, not lexical
  EXPECT_TRUE(std::filesystem::exists(dir_ / "notes.txt"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "step-x.ckpt"));
}

}  // namespace
}  // namespace engine
