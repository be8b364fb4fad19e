#include "engine/format/checkpoint.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "common/file_util.h"
#include "common/hash.h"

namespace engine {
namespace {

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() /
        ("embody-ckpt-test-" + std::to_string(::getpid()) +
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
    d.data.seed = 7;
    d.data.next_sample = 42 * 64;
    d.data.epoch = 1;
    d.data.in_epoch = 42 * 64 - 2000;
    d.data.dataset_samples = 2000;
    d.data.dataset_fingerprint = 0xfeedf00dULL;
    d.rng["flow_noise"] = 0x0123456789abcdefULL;
    d.rng["dropout"] = 99;
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
  EXPECT_TRUE(loaded->has_data_position);
  EXPECT_EQ(loaded->data.seed, 7u);
  EXPECT_EQ(loaded->data.next_sample, 42u * 64);
  EXPECT_EQ(loaded->data.epoch, 1u);
  EXPECT_EQ(loaded->data.in_epoch, 42u * 64 - 2000);
  EXPECT_EQ(loaded->data.dataset_samples, 2000u);
  EXPECT_EQ(loaded->data.dataset_fingerprint, 0xfeedf00dULL);
  EXPECT_EQ(loaded->rng, d.rng);
  EXPECT_EQ(loaded->grad_residual_ranks, 0u);
  EXPECT_TRUE(loaded->grad_residuals.empty());
}

TEST_F(CheckpointTest, Fp8ResidualsOfEveryRankRoundTrip) {
  CheckpointData d = Sample(7);
  d.grad_residual_ranks = 3;
  for (size_t i = 0; i < 3 * d.params.size(); ++i) d.grad_residuals.push_back(1e-4f * i - 0.01f);
  auto loaded = DecodeCheckpoint(EncodeCheckpoint(d));
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->grad_residual_ranks, 3u);
  EXPECT_EQ(loaded->grad_residuals, d.grad_residuals);
  EXPECT_EQ(loaded->adam_v, d.adam_v);
  // Residuals that do not match ranks x parameters are not written.
  d.grad_residuals.pop_back();
  EXPECT_FALSE(SaveCheckpoint(CheckpointPath(dir_.string(), 7), d).ok());
}

// Appends the FNV-1a 64 checksum the format ends with.
std::string WithChecksum(std::string body) {
  const uint64_t h = common::Fnv1a64(body);
  body.append(reinterpret_cast<const char*>(&h), 8);
  return body;
}

template <typename T>
void Append(std::string* s, T v) {
  s->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

TEST_F(CheckpointTest, DecodesVersion1WithoutDataPosition) {
  std::string b = "EMBDCKPT";
  const std::string config = R"({"model":{"d_model":8}})";
  Append<uint32_t>(&b, 1);
  Append<uint32_t>(&b, static_cast<uint32_t>(config.size()));
  Append<uint64_t>(&b, 3);  // step
  Append<uint64_t>(&b, 3);  // adam_t
  Append<uint64_t>(&b, 2);  // n
  b += config;
  for (float f : {1.f, 2.f, 0.1f, 0.2f, 0.01f, 0.02f}) Append<float>(&b, f);
  auto d = DecodeCheckpoint(WithChecksum(b));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_FALSE(d->has_data_position);
  EXPECT_EQ(d->step, 3);
  EXPECT_EQ(d->params, (std::vector<float>{1.f, 2.f}));
  EXPECT_EQ(d->adam_v, (std::vector<float>{0.01f, 0.02f}));
}

// A version 2 file (before datasets): the same header without the three v3 words; it decodes
// as the built-in stream.
TEST_F(CheckpointTest, DecodesVersion2AsTheBuiltInStream) {
  std::string b = "EMBDCKPT";
  const std::string config = R"({"model":{"d_model":8}})";
  Append<uint32_t>(&b, 2);
  Append<uint32_t>(&b, static_cast<uint32_t>(config.size()));
  Append<uint64_t>(&b, 5);    // step
  Append<uint64_t>(&b, 5);    // adam_t
  Append<uint64_t>(&b, 1);    // n
  Append<uint64_t>(&b, 9);    // data_seed
  Append<uint64_t>(&b, 320);  // data_next
  Append<uint64_t>(&b, 0);    // data_epoch
  Append<uint32_t>(&b, 1);    // rng_count
  Append<uint32_t>(&b, 0);    // reserved
  b += config;
  Append<uint32_t>(&b, 4);
  b += "flow";
  Append<uint64_t>(&b, 77);
  for (float f : {1.f, 0.1f, 0.01f}) Append<float>(&b, f);
  auto d = DecodeCheckpoint(WithChecksum(b));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_TRUE(d->has_data_position);
  EXPECT_EQ(d->data.seed, 9u);
  EXPECT_EQ(d->data.next_sample, 320u);
  EXPECT_EQ(d->data.in_epoch, 0u);
  EXPECT_EQ(d->data.dataset_samples, 0u);
  EXPECT_EQ(d->data.dataset_fingerprint, 0u);
  EXPECT_EQ(d->rng.at("flow"), 77u);
  EXPECT_EQ(d->params, std::vector<float>{1.f});
  // A version from the future is refused.
  std::string future = b;
  const uint32_t next = kCheckpointVersion + 1;
  std::memcpy(future.data() + 8, &next, 4);
  EXPECT_FALSE(DecodeCheckpoint(WithChecksum(future)).ok());
}

TEST_F(CheckpointTest, RejectsLyingHeaderWithValidChecksum) {
  // A header claiming 2^61 parameters, checksummed correctly: must fail cleanly, not allocate.
  std::string bytes = EncodeCheckpoint(Sample(1));
  std::string body = bytes.substr(0, bytes.size() - 8);
  const uint64_t huge = uint64_t{1} << 61;
  std::memcpy(body.data() + 8 + 4 + 4 + 8 + 8, &huge, 8);
  auto d = DecodeCheckpoint(WithChecksum(body));
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("truncated"), std::string::npos);
  // An RNG name length past the end.
  body = bytes.substr(0, bytes.size() - 8);
  const uint32_t rng_count = 1000;
  std::memcpy(body.data() + 8 + 4 + 4 + 8 + 8 + 8 + 24, &rng_count, 4);
  EXPECT_FALSE(DecodeCheckpoint(WithChecksum(body)).ok());
  // Residual ranks the file has no room for (2^32 − 1 of them).
  body = bytes.substr(0, bytes.size() - 8);
  const uint32_t ranks = 0xffffffffu;
  std::memcpy(body.data() + 8 + 4 + 4 + 8 + 8 + 8 + 24 + 4, &ranks, 4);
  d = DecodeCheckpoint(WithChecksum(body));
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("truncated"), std::string::npos);
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

TEST_F(CheckpointTest, ResumeTakesTheNewestCheckpointAtOrAfterTheNamedOne) {
  const std::string dir = dir_.string();
  // Named one gone (pruned), newer ones present: the newest.
  for (int64_t s : {150, 175}) {
    ASSERT_TRUE(SaveCheckpoint(CheckpointPath(dir, s), Sample(s)).ok());
  }
  EXPECT_EQ(NewestCheckpointFrom(CheckpointPath(dir, 125)), CheckpointPath(dir, 175));
  EXPECT_EQ(NewestCheckpointFrom(CheckpointPath(dir, 150)), CheckpointPath(dir, 175));
  // Nothing newer than the named one: the named one, present or not.
  EXPECT_EQ(NewestCheckpointFrom(CheckpointPath(dir, 175)), CheckpointPath(dir, 175));
  EXPECT_EQ(NewestCheckpointFrom(CheckpointPath(dir, 200)), CheckpointPath(dir, 200));
  // Not a step-N name, or no such directory: asked for exactly that file.
  EXPECT_EQ(NewestCheckpointFrom(dir + "/final.ckpt"), dir + "/final.ckpt");
  EXPECT_EQ(NewestCheckpointFrom("/nonexistent/step-3.ckpt"), "/nonexistent/step-3.ckpt");
}

}  // namespace
}  // namespace engine
