// Video episode import: LeRobot-style directories made here (episodes.jsonl, and mp4 videos
// encoded with libavcodec from known frames) go into shards; the reader gives the low-dim data
// bit for bit and the frames within a small tolerance. Every kind of bad input is refused naming
// the file and the episode, and leaves no output behind.
#include "storage/lerobot_importer.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "storage/dataset_reader.h"
#include "storage/testing/robomimic_file.h"
#include "storage/testing/video_file.h"

namespace storage {
namespace {

namespace fs = std::filesystem;
using testing::VideoEpisodesSpec;
using testing::WriteVideoEpisodes;

class LerobotImporterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::MakeTempDir("lerobot_importer_test");
    in_ = root_ + "/in";
    out_ = root_ + "/out";
  }
  void TearDown() override { fs::remove_all(root_); }

  std::vector<Episode> Make(const VideoEpisodesSpec& spec = {}) {
    auto eps = WriteVideoEpisodes(in_, spec);
    EXPECT_TRUE(eps.ok()) << eps.status().ToString();
    return eps.ok() ? *eps : std::vector<Episode>{};
  }
  // Rewrites line `line` (0-based) of episodes.jsonl through `edit`.
  void EditLine(size_t line, const std::function<void(nlohmann::json&)>& edit) {
    std::ifstream in(in_ + "/episodes.jsonl");
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    ASSERT_LT(line, lines.size());
    auto j = nlohmann::json::parse(lines[line]);
    edit(j);
    lines[line] = j.dump();
    std::ofstream out(in_ + "/episodes.jsonl", std::ios::trunc);
    for (const auto& l : lines) out << l << "\n";
  }
  // Imports, expects a refusal whose message holds every one of `parts`, and checks that
  // nothing but the input is left in the root.
  void ExpectRefused(const std::vector<std::string>& parts,
                     const VideoEpisodesImportOptions& options = {}) {
    auto r = ImportVideoEpisodes(in_, out_, options);
    ASSERT_FALSE(r.ok()) << "imported, expected: " << parts.back();
    for (const std::string& p : parts) {
      EXPECT_NE(r.status().message().find(p), std::string::npos)
          << "'" << p << "' not in: " << r.status().message();
    }
    std::vector<std::string> left;
    for (const auto& e : fs::directory_iterator(root_)) left.push_back(e.path().filename());
    EXPECT_EQ(left, std::vector<std::string>{"in"}) << "output left behind";
  }
  void ExpectImported(const std::vector<Episode>& want, const Dataset& ds) {
    ASSERT_EQ(ds.episodes(), want.size());
    for (size_t e = 0; e < want.size(); ++e) {
      auto got = ds.ReadEpisode(e);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ASSERT_EQ(got->schema(), want[e].schema()) << "episode " << e;
      for (size_t k = 0; k < want[e].arrays.size(); ++k) {
        const Array& w = want[e].arrays[k];
        const Array& g = got->arrays[k];
        if (w.spec.dtype == DType::kU8) {
          auto d = testing::CompareBlockFrames(g.data.data(), w.data.data(), w.frames,
                                               static_cast<int>(w.spec.frame_shape[0]),
                                               static_cast<int>(w.spec.frame_shape[1]));
          EXPECT_LT(d.mean, 4.0) << "episode " << e << " " << w.spec.name;
          EXPECT_LE(d.max_block_centre, 10) << "episode " << e << " " << w.spec.name;
        } else {
          EXPECT_TRUE(g.data == w.data) << "episode " << e << " " << w.spec.name;
        }
      }
      EXPECT_EQ(got->attributes, want[e].attributes);
    }
  }
  std::string VideoPath(const std::string& cam, int episode) {
    char name[64];
    std::snprintf(name, sizeof(name), "/videos/%s/episode_%06d.mp4", cam.c_str(), episode);
    return in_ + name;
  }

  std::string root_, in_, out_;
};

TEST_F(LerobotImporterTest, RoundTripThroughShards) {
  VideoEpisodesSpec spec;
  spec.lengths = {12, 7, 20, 1, 9};
  auto want = Make(spec);
  int calls = 0;
  VideoEpisodesImportOptions o;
  o.writer.shard_bytes = 200 << 10;  // several shards
  o.progress = [&](const ImportProgress& p) {
    ++calls;
    EXPECT_EQ(p.demos_done, static_cast<uint64_t>(calls));
    EXPECT_EQ(p.demos_total, 5u);
  };
  auto r = ImportVideoEpisodes(in_, out_, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(calls, 5);
  EXPECT_EQ(r->episodes, 5u);
  EXPECT_EQ(r->frames, 49u);
  EXPECT_GT(r->manifest.shards.size(), 1u);
  EXPECT_EQ(r->manifest.source["type"], "video");
  EXPECT_EQ(r->manifest.source["cameras"]["obs/top"], "videos/top");

  auto ds = Dataset::Open(out_);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  ExpectImported(want, **ds);
  // The cameras are image keys: patch tokens, counted in the index (48×64, P=14: 4·5 patches
  // per camera, 1 proprio, 6 words, 16 actions).
  EXPECT_EQ((*ds)->SampleTokens(0), 6u + 2 * 20 + 1 + 16);
  // A sample reads its frame from the shard like any other key.
  auto s = (*ds)->ReadSample(12 + 3);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto ep1 = (*ds)->ReadEpisode(1);
  const size_t fb = 48 * 64 * 3;
  ASSERT_EQ(s->values[2].spec.name, "obs/top");
  EXPECT_TRUE(std::equal(s->values[2].data.begin(), s->values[2].data.end(),
                         ep1->arrays[2].data.begin() + 3 * fb));
  EXPECT_TRUE((*ds)->Verify().ok());
}

TEST_F(LerobotImporterTest, H264WithLerobotCameraNamesAndEpisodesOutOfOrder) {
  if (!testing::HasVideoEncoder("libx264")) GTEST_SKIP() << "no libx264 encoder in libavcodec";
  VideoEpisodesSpec spec;
  spec.cameras = {"observation.images.top", "observation.images.wrist"};
  spec.video.codec = "libx264";
  spec.lengths = {15, 8};
  auto want = Make(spec);
  for (Episode& e : want) {
    for (Array& a : e.arrays) {
      if (a.spec.name.rfind("obs/observation.images.", 0) == 0)
        a.spec.name = "obs/" + a.spec.name.substr(23);
    }
    std::sort(e.arrays.begin(), e.arrays.end(),
              [](const Array& x, const Array& y) { return x.spec.name < y.spec.name; });
  }
  // Lines in reverse order: episodes are still written by episode_index.
  {
    std::ifstream in(in_ + "/episodes.jsonl");
    std::string a, b;
    std::getline(in, a);
    std::getline(in, b);
    in.close();
    std::ofstream(in_ + "/episodes.jsonl", std::ios::trunc) << b << "\n\n" << a << "\n";
  }
  auto r = ImportVideoEpisodes(in_, out_, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto ds = Dataset::Open(out_);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  ExpectImported(want, **ds);
}

TEST_F(LerobotImporterTest, ResizeAndLanguageOverride) {
  VideoEpisodesSpec spec;
  spec.state_dim = 0;
  auto want = Make(spec);
  VideoEpisodesImportOptions o;
  o.video.width = 32;
  o.video.height = 24;
  o.language = "stack the blocks";
  o.threads = 3;
  auto r = ImportVideoEpisodes(in_, out_, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto ds = Dataset::Open(out_);
  ASSERT_TRUE(ds.ok());
  Schema schema = (*ds)->schema();
  ASSERT_EQ(schema.size(), 3u);  // actions, obs/top, obs/wrist: no state
  EXPECT_EQ(schema[1].ToString(), "obs/top u8 (24,32,3)");
  EXPECT_EQ((*ds)->manifest().source["resize"], nlohmann::json({24, 32}));
  auto ep = (*ds)->ReadEpisode(2);
  ASSERT_TRUE(ep.ok());
  EXPECT_EQ(ep->Attribute(kAttrLanguage), "stack the blocks");
  EXPECT_TRUE(ep->arrays[0].data == want[2].arrays[0].data);
}

TEST_F(LerobotImporterTest, VideoFrameCountMustMatchTheEpisodeLength) {
  Make();
  auto short_frames = testing::BlockFrames(3, 10, 48, 64);
  ASSERT_TRUE(testing::WriteVideo(VideoPath("wrist", 0), short_frames.data(), 10, 48, 64).ok());
  ExpectRefused(
      {in_ + " episode 0", VideoPath("wrist", 0), "has 10 frames", "the episode's length is 12"});

  auto long_frames = testing::BlockFrames(3, 9, 48, 64);
  Make();
  ASSERT_TRUE(testing::WriteVideo(VideoPath("top", 1), long_frames.data(), 9, 48, 64).ok());
  ExpectRefused({in_ + " episode 1 (length 7)", VideoPath("top", 1), "more than 7 frames"});
}

TEST_F(LerobotImporterTest, MissingTruncatedAndUndecodableVideos) {
  Make();
  fs::remove(VideoPath("top", 2));
  ExpectRefused({in_ + " episode 2", "missing video " + VideoPath("top", 2)});

  Make();
  fs::resize_file(VideoPath("wrist", 2), fs::file_size(VideoPath("wrist", 2)) / 2);
  ExpectRefused({in_ + " episode 2", VideoPath("wrist", 2) + ": not a readable video"});

  Make();
  std::ofstream(VideoPath("top", 1), std::ios::trunc) << "not a video at all";
  ExpectRefused({in_ + " episode 1", VideoPath("top", 1) + ": not a readable video"});
}

TEST_F(LerobotImporterTest, FrameSizeMustStayTheSameUnlessResized) {
  Make();
  auto small = testing::BlockFrames(3, 7, 32, 32);
  ASSERT_TRUE(testing::WriteVideo(VideoPath("top", 1), small.data(), 7, 32, 32).ok());
  ExpectRefused(
      {in_ + " episode 1", VideoPath("top", 1), "is 32x32, the first episode's is 64x48"});
  VideoEpisodesImportOptions o;
  o.video.width = 16;
  o.video.height = 16;
  EXPECT_TRUE(ImportVideoEpisodes(in_, out_, o).ok());
}

TEST_F(LerobotImporterTest, BadEpisodesFileLinesAreRefusedNamingTheLineAndEpisode) {
  const std::string file = "/episodes.jsonl line ";
  Make();
  EditLine(1, [](nlohmann::json& j) { j["action"].erase(j["action"].begin()); });
  ExpectRefused({in_ + file + "2 (episode 1)", "action has 6 rows, length is 7"});

  Make();
  EditLine(2, [](nlohmann::json& j) { j["observation.state"][4].push_back(1.0); });
  ExpectRefused({file + "3 (episode 2)", "observation.state row 4 has 7 values, row 0 has 6"});

  Make();
  EditLine(1, [](nlohmann::json& j) { j["action"][0] = nlohmann::json::array({1, 2}); });
  ExpectRefused({file + "2 (episode 1)", "action has 2 values per row, the first episode has 7"});

  Make();
  EditLine(0, [](nlohmann::json& j) { j["action"][3][2] = 1e39; });
  ExpectRefused({file + "1 (episode 0)", "action row 3 element 2 is not a finite f32"});

  Make();
  EditLine(0, [](nlohmann::json& j) { j["action"][3][2] = "x"; });
  ExpectRefused({file + "1 (episode 0)", "action row 3 element 2 is not a finite f32"});

  Make();
  EditLine(2, [](nlohmann::json& j) { j.erase("observation.state"); });
  ExpectRefused({file + "3 (episode 2)", "has no observation.state, the first episode has it"});

  Make();
  EditLine(2, [](nlohmann::json& j) { j["episode_index"] = 0; });
  ExpectRefused({file + "3 (episode 0)", "episode_index repeats line 1"});

  Make();
  EditLine(1, [](nlohmann::json& j) { j.erase("length"); });
  ExpectRefused({file + "2 (episode 1)", "length must be an integer"});

  Make();
  EditLine(0, [](nlohmann::json& j) { j.erase("action"); });
  ExpectRefused({file + "1 (episode 0)", "no action field"});

  Make();
  VideoEpisodesImportOptions short_episodes;
  short_episodes.max_episode_frames = 15;
  ExpectRefused({file + "3 (episode 2)", "20 frames, more than the maximum of 15"}, short_episodes);

  Make();
  std::ofstream(in_ + "/episodes.jsonl", std::ios::app) << "{\"episode_index\": 3,\n";
  ExpectRefused({file + "4", "not a JSON object"});

  Make();
  std::ofstream(in_ + "/episodes.jsonl", std::ios::trunc) << "\n";
  ExpectRefused({"episodes.jsonl: no episodes"});

  Make();
  fs::remove_all(in_ + "/videos");
  ExpectRefused({in_ + ": no videos/ directory"});
}

}  // namespace
}  // namespace storage
