// Shard files: round trip, and every way a shard can be damaged is caught with the file named.
#include <filesystem>
#include <fstream>
#include <random>

#include <gtest/gtest.h>

#include "storage/shard_reader.h"
#include "storage/shard_writer.h"
#include "storage/testing/episodes.h"
#include "storage/testing/robomimic_file.h"

namespace storage {
namespace {

namespace fs = std::filesystem;
using testing::MakeEpisode;

class ShardTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::MakeTempDir("shard_test"); }
  void TearDown() override { fs::remove_all(dir_); }

  // Three episodes of 5, 9 and 1 frames, chunks of 100 bytes (several per key).
  std::string WriteShard(std::vector<Episode>* episodes) {
    std::string path = dir_ + "/a.embs";
    Schema schema = MakeEpisode(0, 1).schema();
    auto w = ShardWriter::Create(path, schema, {.chunk_bytes = 100});
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    int64_t frames[] = {5, 9, 1};
    for (int i = 0; i < 3; ++i) {
      episodes->push_back(MakeEpisode(i, frames[i], "demo_" + std::to_string(i)));
      std::vector<uint32_t> tokens(frames[i]);
      for (int64_t t = 0; t < frames[i]; ++t) tokens[t] = static_cast<uint32_t>(100 * i + t);
      EXPECT_TRUE((*w)->Add(episodes->back(), tokens, "ep").ok());
    }
    uint64_t predicted = (*w)->size();
    EXPECT_TRUE((*w)->Finish().ok());
    EXPECT_EQ(fs::file_size(path), predicted);
    return path;
  }

  std::string dir_;
};

void ExpectSameEpisode(const Episode& want, const Episode& got) {
  ASSERT_EQ(want.arrays.size(), got.arrays.size());
  for (size_t k = 0; k < want.arrays.size(); ++k) {
    EXPECT_EQ(want.arrays[k].spec, got.arrays[k].spec);
    EXPECT_EQ(want.arrays[k].frames, got.arrays[k].frames);
    EXPECT_EQ(want.arrays[k].data, got.arrays[k].data) << want.arrays[k].spec.name;
  }
  EXPECT_EQ(want.attributes, got.attributes);
}

TEST_F(ShardTest, RoundTripKeepsBytesAttributesAndTokenCounts) {
  std::vector<Episode> episodes;
  std::string path = WriteShard(&episodes);
  auto r = ShardReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ((*r)->episodes(), 3u);
  EXPECT_EQ((*r)->schema(), episodes[0].schema());
  for (size_t e = 0; e < 3; ++e) {
    auto got = (*r)->ReadEpisode(e);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ExpectSameEpisode(episodes[e], *got);
    const auto& tokens = (*r)->index().episodes[e].sample_tokens;
    for (size_t t = 0; t < tokens.size(); ++t) EXPECT_EQ(tokens[t], 100 * e + t);
  }
  // The image key (192 bytes a frame) gets one frame per chunk; actions (28 bytes) three.
  EXPECT_EQ((*r)->index().episodes[1].keys[1].crcs.size(), 9u);
  EXPECT_EQ((*r)->index().episodes[1].keys[0].frames_per_chunk, 3u);
  EXPECT_TRUE((*r)->VerifyAll().ok());
}

TEST_F(ShardTest, EveryTruncationIsRefusedAtOpenNamingTheFile) {
  std::vector<Episode> episodes;
  std::string path = WriteShard(&episodes);
  std::string bytes = testing::ReadAll(path);
  for (size_t cut :
       {size_t{0}, size_t{10}, size_t{47}, bytes.size() / 2, bytes.size() - 33, bytes.size() - 1}) {
    std::string t = dir_ + "/cut.embs";
    {
      std::ofstream out(t, std::ios::binary | std::ios::trunc);
      out.write(bytes.data(), static_cast<std::streamsize>(cut));
    }
    auto r = ShardReader::Open(t);
    ASSERT_FALSE(r.ok()) << "cut at " << cut;
    EXPECT_NE(r.status().message().find(t), std::string::npos) << r.status().message();
  }
}

TEST_F(ShardTest, FlippedByteInAChunkNamesFileEpisodeKeyAndChunk) {
  std::vector<Episode> episodes;
  std::string path = WriteShard(&episodes);
  uint64_t offset;
  {
    auto r = ShardReader::Open(path);
    ASSERT_TRUE(r.ok());
    // Episode 1, key obs/image (1 frame per chunk), chunk 4.
    offset = (*r)->index().episodes[1].keys[1].data_offset + 4 * 192 + 17;
  }
  testing::FlipByte(path, offset);
  auto r = ShardReader::Open(path);
  ASSERT_TRUE(r.ok()) << "data damage is found when the data is read, not at open";
  EXPECT_TRUE((*r)->ReadEpisode(0).ok());
  EXPECT_TRUE((*r)->ReadChunk(1, 1, 3).ok());
  auto bad = (*r)->ReadEpisode(1);
  ASSERT_FALSE(bad.ok());
  const std::string& m = bad.status().message();
  EXPECT_NE(m.find(path), std::string::npos) << m;
  EXPECT_NE(m.find("episode 1 (demo_1)"), std::string::npos) << m;
  EXPECT_NE(m.find("obs/image chunk 4"), std::string::npos) << m;
  EXPECT_FALSE((*r)->ReadChunk(1, 1, 4).ok());
  common::Status verify = (*r)->VerifyAll();
  EXPECT_FALSE(verify.ok());
  EXPECT_NE(verify.message().find("chunk 4"), std::string::npos);
}

TEST_F(ShardTest, FlippedByteInTheIndexIsRefusedAtOpen) {
  std::vector<Episode> episodes;
  std::string path = WriteShard(&episodes);
  testing::FlipByte(path, fs::file_size(path) - kFooterSize - 20);
  auto r = ShardReader::Open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("index checksum"), std::string::npos);
  EXPECT_NE(r.status().message().find(path), std::string::npos);
}

TEST_F(ShardTest, AbandonedWriterLeavesNoFile) {
  std::string path = dir_ + "/gone.embs";
  {
    auto w = ShardWriter::Create(path, MakeEpisode(0, 1).schema());
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Add(MakeEpisode(1, 4), std::vector<uint32_t>(4, 1), "ep").ok());
    EXPECT_TRUE(fs::exists(path + ".tmp"));
  }
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(ShardTest, EpisodeWithAnotherSchemaIsRefused) {
  auto w = ShardWriter::Create(dir_ + "/s.embs", MakeEpisode(0, 1).schema());
  ASSERT_TRUE(w.ok());
  Episode e = MakeEpisode(1, 3);
  e.arrays[2].spec.frame_shape = {2, 2};  // same bytes, another shape
  common::Status st = (*w)->Add(e, std::vector<uint32_t>(3, 1), "x.hdf5 demo_3");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("x.hdf5 demo_3"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("obs/state"), std::string::npos) << st.message();
}

// Hostile indexes: random damage to a valid index (with its checksum recomputed, as an
// attacker would) never crashes the decoder or lets an entry point outside the data region.
TEST_F(ShardTest, DamagedIndexesAreRefusedOrStayInBounds) {
  std::vector<Episode> episodes;
  std::string path = WriteShard(&episodes);
  std::string bytes = testing::ReadAll(path);
  auto footer = DecodeFooter(bytes.substr(bytes.size() - kFooterSize), bytes.size(), path);
  ASSERT_TRUE(footer.ok());
  std::string index = bytes.substr(footer->index_offset, footer->index_size);
  std::mt19937_64 rng(7);
  int refused = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string d = index;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < edits; ++k) d[rng() % d.size()] = static_cast<char>(rng());
    if (rng() % 8 == 0) d.resize(rng() % d.size());
    auto decoded = DecodeIndex(d, footer->index_offset, path);
    if (!decoded.ok()) {
      ++refused;
      continue;
    }
    for (const EpisodeEntry& e : decoded->episodes) {
      for (size_t k = 0; k < e.keys.size(); ++k) {
        uint64_t size = uint64_t{e.frames} * decoded->schema[k].FrameBytes();
        EXPECT_LE(e.keys[k].data_offset + size, footer->index_offset);
      }
    }
  }
  EXPECT_GT(refused, 1000);
}

}  // namespace
}  // namespace storage
