// Dataset directories: rolling shards, the manifest, random access to episodes and samples,
// and what a failed or tampered write leaves.
#include <filesystem>

#include <gtest/gtest.h>

#include "storage/dataset_reader.h"
#include "storage/dataset_writer.h"
#include "storage/testing/episodes.h"
#include "storage/testing/robomimic_file.h"

namespace storage {
namespace {

namespace fs = std::filesystem;
using testing::MakeEpisode;

class DatasetTest : public ::testing::Test {
 protected:
  void SetUp() override { root_ = testing::MakeTempDir("dataset_test"); }
  void TearDown() override { fs::remove_all(root_); }

  // 12 episodes of 3..14 frames in shards of ~8 KiB (each episode is 0.7-3.3 KiB).
  std::string Write(std::vector<Episode>* episodes, TokenMapping mapping = {}) {
    std::string dir = root_ + "/ds";
    DatasetWriterOptions o;
    o.shard_bytes = 8 << 10;
    o.shard.chunk_bytes = 256;
    o.mapping = mapping;
    auto w = DatasetWriter::Create(dir, o);
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    for (int i = 0; i < 12; ++i) {
      episodes->push_back(MakeEpisode(i, 3 + i, "demo_" + std::to_string(i)));
      EXPECT_TRUE((*w)->Add(episodes->back(), "ep " + std::to_string(i)).ok());
    }
    EXPECT_TRUE(fs::exists((*w)->temp_dir()));
    EXPECT_FALSE(fs::exists(dir));
    auto m = (*w)->Finish({{"type", "test"}});
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return dir;
  }

  std::string root_;
};

TEST_F(DatasetTest, RollsShardsAndReadsEveryEpisodeBack) {
  std::vector<Episode> episodes;
  std::string dir = Write(&episodes);
  auto ds = Dataset::Open(dir);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  const DatasetManifest& m = (*ds)->manifest();
  EXPECT_GT(m.shards.size(), 2u);
  for (const ShardInfo& s : m.shards) {
    EXPECT_EQ(fs::file_size(dir + "/" + s.file), s.bytes);
    // Past the first episode, a shard stops before the target.
    if (s.episodes > 1) {
      EXPECT_LE(s.bytes, 8u << 10);
    }
  }
  EXPECT_EQ(m.source["type"], "test");
  ASSERT_EQ((*ds)->episodes(), 12u);
  EXPECT_EQ((*ds)->samples(), 12u * 3 + 66);
  EXPECT_EQ(m.stats.episodes, 12u);
  EXPECT_EQ(m.stats.frames, (*ds)->samples());
  for (uint64_t e = 0; e < 12; ++e) {
    auto got = (*ds)->ReadEpisode(e);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    for (size_t k = 0; k < got->arrays.size(); ++k) {
      EXPECT_EQ(got->arrays[k].data, episodes[e].arrays[k].data);
    }
    EXPECT_EQ(got->Attribute(kAttrDemoName), "demo_" + std::to_string(e));
  }
  EXPECT_FALSE((*ds)->ReadEpisode(12).ok());
  EXPECT_TRUE((*ds)->Verify().ok());
}

TEST_F(DatasetTest, SamplesAreFrameRowsWithTheFollowingActionChunk) {
  std::vector<Episode> episodes;
  TokenMapping mapping;
  mapping.action_horizon = 4;
  mapping.patch_size = 4;  // 8x8 image -> 4 patches
  std::string dir = Write(&episodes, mapping);
  auto ds = Dataset::Open(dir);
  ASSERT_TRUE(ds.ok());
  // language 5 words + 4 patches + 1 proprio + 4 actions
  const uint32_t tokens = 5 + 4 + 1 + 4;
  for (uint64_t s = 0; s < (*ds)->samples(); ++s) {
    auto [e, t] = (*ds)->Locate(s);
    EXPECT_EQ((*ds)->SampleTokens(s), tokens);
    auto sample = (*ds)->ReadSample(s);
    ASSERT_TRUE(sample.ok()) << sample.status().ToString();
    EXPECT_EQ(sample->episode, e);
    EXPECT_EQ(sample->frame, t);
    const Episode& want = episodes[e];
    for (size_t k = 0; k < want.arrays.size(); ++k) {
      const Array& a = want.arrays[k];
      size_t fb = static_cast<size_t>(a.spec.FrameBytes());
      std::vector<uint8_t> row(a.data.begin() + t * fb, a.data.begin() + (t + 1) * fb);
      EXPECT_EQ(sample->values[k].data, row) << a.spec.name << " sample " << s;
    }
    int64_t end = std::min<int64_t>(want.frames(), t + 4);
    EXPECT_EQ(sample->action_chunk.frames, end - t);
    const Array& act = want.arrays[0];
    std::vector<uint8_t> chunk(act.data.begin() + t * 28, act.data.begin() + end * 28);
    EXPECT_EQ(sample->action_chunk.data, chunk);
  }
  EXPECT_GT((*ds)->cache().hits(), 0u);
  EXPECT_FALSE((*ds)->ReadSample((*ds)->samples()).ok());
}

TEST_F(DatasetTest, ReadKeyRowsReadsOneKeysRowsAndRefusesOthers) {
  std::vector<Episode> episodes;
  std::string dir = Write(&episodes);
  auto ds = Dataset::Open(dir);
  ASSERT_TRUE(ds.ok());
  for (uint64_t e : {0u, 5u, 11u}) {
    for (size_t k = 0; k < episodes[e].arrays.size(); ++k) {
      const Array& a = episodes[e].arrays[k];
      const size_t fb = static_cast<size_t>(a.spec.FrameBytes());
      const uint32_t frames = static_cast<uint32_t>(a.frames);
      std::vector<uint8_t> got((frames - 1) * fb);
      ASSERT_TRUE((*ds)->ReadKeyRows(e, k, 1, frames, got.data()).ok());
      EXPECT_EQ(got, std::vector<uint8_t>(a.data.begin() + fb, a.data.end())) << a.spec.name;
    }
  }
  uint8_t buf[64];
  EXPECT_FALSE((*ds)->ReadKeyRows(12, 0, 0, 1, buf).ok());  // no such episode
  EXPECT_FALSE((*ds)->ReadKeyRows(0, episodes[0].arrays.size(), 0, 1, buf).ok());  // no such key
  EXPECT_FALSE((*ds)->ReadKeyRows(0, 0, 0, 4, buf).ok());  // episode 0 has 3 frames
  EXPECT_FALSE((*ds)->ReadKeyRows(0, 0, 2, 1, buf).ok());
}

TEST_F(DatasetTest, WriterDestroyedBeforeFinishLeavesNothing) {
  {
    auto w = DatasetWriter::Create(root_ + "/ds", {});
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Add(MakeEpisode(1, 5), "ep").ok());
  }
  EXPECT_TRUE(fs::is_empty(root_));
}

TEST_F(DatasetTest, ExistingOutputIsRefused) {
  fs::create_directory(root_ + "/ds");
  auto w = DatasetWriter::Create(root_ + "/ds/", {});
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), common::Code::kAlreadyExists);
}

TEST_F(DatasetTest, ShardThatIsNotTheManifestsIsRefused) {
  std::vector<Episode> episodes;
  std::string dir = Write(&episodes);
  auto m = ReadManifest(dir);
  ASSERT_TRUE(m.ok());
  fs::copy_file(dir + "/" + m->shards[1].file, dir + "/" + m->shards[0].file,
                fs::copy_options::overwrite_existing);
  auto ds = Dataset::Open(dir);
  ASSERT_FALSE(ds.ok());
  EXPECT_NE(ds.status().message().find(m->shards[0].file), std::string::npos);
}

TEST_F(DatasetTest, MissingOrTruncatedShardIsNamed) {
  std::vector<Episode> episodes;
  std::string dir = Write(&episodes);
  auto m = ReadManifest(dir);
  ASSERT_TRUE(m.ok());
  std::string shard = dir + "/" + m->shards[2].file;
  fs::resize_file(shard, fs::file_size(shard) - 100);
  auto ds = Dataset::Open(dir);
  ASSERT_FALSE(ds.ok());
  EXPECT_NE(ds.status().message().find(shard), std::string::npos) << ds.status().message();
  fs::remove(shard);
  ds = Dataset::Open(dir);
  ASSERT_FALSE(ds.ok());
  EXPECT_NE(ds.status().message().find(shard), std::string::npos);
}

TEST_F(DatasetTest, ManifestNamingAFileOutsideTheDirectoryIsRefused) {
  std::vector<Episode> episodes;
  std::string dir = Write(&episodes);
  auto m = ReadManifest(dir);
  ASSERT_TRUE(m.ok());
  nlohmann::json j = m->ToJson();
  j["shards"][0]["file"] = "../etc/passwd";
  EXPECT_FALSE(DatasetManifest::FromJson(j).ok());
  j = m->ToJson();
  j["stats"]["frames"] = 1;
  EXPECT_FALSE(DatasetManifest::FromJson(j).ok());
}

}  // namespace
}  // namespace storage
