// LeRobot v2.1 and v3.0 import: datasets whose parquet files and metadata come from an
// independent writer (parquet-wasm, storage/parquet/testdata/gen_lerobot.mjs) and whose mp4
// videos are encoded here with libavcodec from known frames. The shards must hold the writer's
// values bit for bit, the episodes' boundaries and tasks, and the frames within a small
// tolerance; inconsistent data is refused naming the episode and the file, leaving no output.
#include "storage/lerobot_dataset.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "storage/dataset_reader.h"
#include "storage/testing/robomimic_file.h"
#include "storage/testing/video_file.h"

namespace storage {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kFixtures = EMBODY_LEROBOT_FIXTURES;

// Episode e's camera frames: flat colour blocks, different in every episode.
std::vector<uint8_t> CameraFrames(int64_t episode, int64_t frames, int height, int width) {
  return testing::BlockFrames(static_cast<uint64_t>(episode) + 1, frames, height, width);
}

class LerobotDatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const fs::path unavailable = kFixtures.parent_path() / "UNAVAILABLE";
    if (fs::exists(unavailable)) {
      std::ifstream in(unavailable);
      std::string reason;
      std::getline(in, reason);
      GTEST_SKIP() << "LeRobot datasets from parquet-wasm were not generated: " << reason;
    }
    if (!fs::exists(kFixtures / "expected.json")) {
      GTEST_SKIP() << "LeRobot datasets from parquet-wasm were not generated (build the target "
                      "parquet_fixtures): "
                   << kFixtures;
    }
    std::ifstream in(kFixtures / "expected.json");
    expected_ = json::parse(in);
    fps_ = expected_["fps"].get<int>();
    height_ = expected_["height"].get<int>();
    width_ = expected_["width"].get<int>();
    root_ = testing::MakeTempDir("lerobot_dataset_test");
    in_ = root_ + "/in";
    out_ = root_ + "/out";
  }
  void TearDown() override {
    if (!root_.empty()) fs::remove_all(root_);
  }

  int64_t Length(int64_t e) const { return expected_["episodes"][e]["length"].get<int64_t>(); }

  // Copies the layout `version` ("v21", "v30") to in_ and encodes its videos; `frames_of(e)`
  // says how many frames of episode e go into its video (its length unless changed).
  void Make(const std::string& version, const std::function<int64_t(int64_t)>& frames_of = nullptr,
            const std::string& codec = "mpeg4") {
    fs::copy(kFixtures / version, in_, fs::copy_options::recursive);
    for (const json& v : expected_["videos"][version]) {
      std::vector<uint8_t> rgb;
      int64_t frames = 0;
      for (const json& e : v["episodes"]) {
        const int64_t ep = e.get<int64_t>();
        const int64_t n = frames_of ? frames_of(ep) : Length(ep);
        auto f = CameraFrames(ep, n, height_, width_);
        rgb.insert(rgb.end(), f.begin(), f.end());
        frames += n;
      }
      const std::string path = in_ + "/" + v["path"].get<std::string>();
      fs::create_directories(fs::path(path).parent_path());
      testing::VideoWriteOptions o;
      o.fps = fps_;
      o.codec = codec;
      ASSERT_TRUE(testing::WriteVideo(path, rgb.data(), frames, height_, width_, o).ok()) << path;
    }
  }

  void EditInfo(const std::function<void(json&)>& edit) {
    std::ifstream in(in_ + "/meta/info.json");
    json j = json::parse(in);
    edit(j);
    std::ofstream(in_ + "/meta/info.json", std::ios::trunc) << j.dump();
  }

  // Imports, expects a refusal whose message holds every one of `parts`, and checks that
  // nothing but the input is left in the root.
  void ExpectRefused(const std::vector<std::string>& parts) {
    auto r = ImportLerobot(in_, out_, {});
    ASSERT_FALSE(r.ok()) << "imported, expected: " << parts.back();
    for (const std::string& p : parts) {
      EXPECT_NE(r.status().message().find(p), std::string::npos)
          << "'" << p << "' not in: " << r.status().message();
    }
    std::vector<std::string> left;
    for (const auto& e : fs::directory_iterator(root_)) left.push_back(e.path().filename());
    EXPECT_EQ(left, std::vector<std::string>{"in"}) << "output left behind";
  }

  // The dataset at out_ holds what the writer wrote: every value of actions and obs/state, the
  // tasks, and the camera frames (the last `short_by` frames of episode 0 repeated).
  void ExpectImported(int height, int width) {
    auto ds = Dataset::Open(out_);
    ASSERT_TRUE(ds.ok()) << ds.status().ToString();
    const json& eps = expected_["episodes"];
    ASSERT_EQ((*ds)->episodes(), eps.size());
    const int dim = expected_["dim"].get<int>();
    for (size_t e = 0; e < eps.size(); ++e) {
      auto got = (*ds)->ReadEpisode(e);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      const int64_t n = eps[e]["length"].get<int64_t>();
      ASSERT_EQ(got->frames(), n) << "episode " << e;
      for (auto [key, field] : {std::pair{"actions", "action"}, std::pair{"obs/state", "state"}}) {
        const Array* a = got->Find(key);
        ASSERT_NE(a, nullptr) << key;
        ASSERT_EQ(a->spec.dtype, DType::kF32);
        ASSERT_EQ(a->spec.frame_shape, std::vector<int64_t>{dim});
        const float* v = reinterpret_cast<const float*>(a->data.data());
        for (int64_t f = 0; f < n; ++f) {
          for (int k = 0; k < dim; ++k) {
            ASSERT_EQ(v[f * dim + k], eps[e][field][f][k].get<float>())
                << "episode " << e << " " << key << " frame " << f << " element " << k;
          }
        }
      }
      std::string task;
      for (const json& t : eps[e]["tasks"])
        task += (task.empty() ? "" : "; ") + t.get<std::string>();
      EXPECT_EQ(got->Attribute(kAttrLanguage), task) << "episode " << e;
      const Array* cam = got->Find("obs/top");
      ASSERT_NE(cam, nullptr);
      ASSERT_EQ(cam->spec.frame_shape, (std::vector<int64_t>{height, width, 3}));
      if (height == height_ && width == width_) {
        auto want = CameraFrames(static_cast<int64_t>(e), n, height_, width_);
        auto d = testing::CompareBlockFrames(cam->data.data(), want.data(), n, height_, width_);
        EXPECT_LT(d.mean, 4.0) << "episode " << e;
        EXPECT_LE(d.max_block_centre, 10) << "episode " << e;
      }
    }
    EXPECT_TRUE((*ds)->Verify().ok());
  }

  json expected_;
  int fps_ = 0, height_ = 0, width_ = 0;
  std::string root_, in_, out_;
};

TEST_F(LerobotDatasetTest, V21Imports) {
  Make("v21");
  int calls = 0;
  VideoEpisodesImportOptions o;
  o.progress = [&](const ImportProgress& p) {
    EXPECT_EQ(p.demos_done, static_cast<uint64_t>(++calls));
    EXPECT_EQ(p.demos_total, 3u);
  };
  auto r = ImportLerobot(in_, out_, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(r->episodes, 3u);
  EXPECT_EQ(r->frames, 28u);
  EXPECT_EQ(r->manifest.source["type"], "lerobot");
  EXPECT_EQ(r->manifest.source["codebase_version"], "v2.1");
  EXPECT_EQ(r->manifest.source["cameras"]["obs/top"], "observation.images.top");
  ExpectImported(height_, width_);
}

TEST_F(LerobotDatasetTest, V30ImportsEpisodesSharingDataAndVideoFiles) {
  Make("v30");
  VideoEpisodesImportOptions o;
  o.threads = 3;  // episodes of one data file read at once share it
  auto r = ImportLerobot(in_, out_, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->episodes, 3u);
  EXPECT_EQ(r->frames, 28u);
  EXPECT_EQ(r->manifest.source["codebase_version"], "v3.0");
  ExpectImported(height_, width_);
}

// LeRobot encodes its videos in AV1; Debian's libavcodec decodes them through libdav1d.
TEST_F(LerobotDatasetTest, V30ImportsAv1Videos) {
  if (!testing::HasVideoEncoder("libaom-av1"))
    GTEST_SKIP() << "no libaom-av1 encoder in libavcodec";
  testing::QuietVideoLogs();
  Make("v30", nullptr, "libaom-av1");
  auto r = ImportLerobot(in_, out_, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectImported(height_, width_);
}

TEST_F(LerobotDatasetTest, V30Resizes) {
  Make("v30");
  VideoEpisodesImportOptions o;
  o.video.height = 24;
  o.video.width = 32;
  auto r = ImportLerobot(in_, out_, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectImported(24, 32);
}

TEST_F(LerobotDatasetTest, LayoutResolvesChunkedPaths) {
  Make("v21");
  auto layout = ReadLerobotLayout(in_, {});
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  ASSERT_EQ(layout->episodes.size(), 3u);
  EXPECT_EQ(layout->action_dim, 26);
  EXPECT_EQ(layout->state_dim, 26);
  // chunks_size 2: episode 2 is in chunk 1.
  EXPECT_EQ(layout->episodes[2].data_path, in_ + "/data/chunk-001/episode_000002.parquet");
  EXPECT_EQ(layout->episodes[2].videos[0].path,
            in_ + "/videos/chunk-001/observation.images.top/episode_000002.mp4");
  EXPECT_EQ(layout->episodes[1].task, "open the drawer");
}

TEST_F(LerobotDatasetTest, VideoOneFrameShortIsToleratedAndRepeatsTheLastFrame) {
  Make("v21", [&](int64_t e) { return e == 0 ? Length(0) - 1 : Length(e); });
  auto r = ImportLerobot(in_, out_, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto ds = Dataset::Open(out_);
  ASSERT_TRUE(ds.ok());
  auto ep = (*ds)->ReadEpisode(0);
  ASSERT_TRUE(ep.ok());
  const Array* cam = ep->Find("obs/top");
  const size_t fb = static_cast<size_t>(height_) * width_ * 3;
  const int64_t n = Length(0);
  ASSERT_EQ(cam->frames, n);
  EXPECT_EQ(std::memcmp(cam->data.data() + (n - 1) * fb, cam->data.data() + (n - 2) * fb, fb), 0);
}

TEST_F(LerobotDatasetTest, MissingParquetIsRefused) {
  Make("v21");
  fs::remove(in_ + "/data/chunk-001/episode_000002.parquet");
  ExpectRefused({"episode 2", "missing data file", "data/chunk-001/episode_000002.parquet"});
}

TEST_F(LerobotDatasetTest, V30MissingDataFileIsRefused) {
  Make("v30");
  fs::remove(in_ + "/data/chunk-000/file-001.parquet");
  ExpectRefused({"episode 2", "data/chunk-000/file-001.parquet"});
}

TEST_F(LerobotDatasetTest, FrameIndexGapIsRefused) {
  Make("v21");
  fs::copy_file(kFixtures / "bad/v21_episode_000001_frame_gap.parquet",
                in_ + "/data/chunk-000/episode_000001.parquet",
                fs::copy_options::overwrite_existing);
  ExpectRefused({"episode 1", "episode_000001.parquet", "row 3", "frame_index is 4, expected 3"});
}

TEST_F(LerobotDatasetTest, LateTimestampIsRefused) {
  Make("v21");
  fs::copy_file(kFixtures / "bad/v21_episode_000000_late_timestamp.parquet",
                in_ + "/data/chunk-000/episode_000000.parquet",
                fs::copy_options::overwrite_existing);
  ExpectRefused({"episode 0", "episode_000000.parquet", "row 2", "more than 1/fps"});
}

TEST_F(LerobotDatasetTest, VideoTooShortIsRefused) {
  Make("v21", [&](int64_t e) { return e == 0 ? Length(0) - 3 : Length(e); });
  ExpectRefused(
      {"episode 0", "observation.images.top/episode_000000.mp4", "has 9 frames", "12 rows"});
}

TEST_F(LerobotDatasetTest, V30VideoEndingEarlyIsRefused) {
  // file-000 holds episodes 0 and 1; episode 1 loses its last 3 frames.
  Make("v30", [&](int64_t e) { return e == 1 ? Length(1) - 3 : Length(e); });
  ExpectRefused({"episode 1", "observation.images.top/chunk-000/file-000.mp4", "ends before"});
}

TEST_F(LerobotDatasetTest, BadInfoJsonIsRefused) {
  Make("v21");
  EditInfo([](json& j) { j["codebase_version"] = "v9.9"; });
  ExpectRefused({"meta/info.json", "v9.9", "not supported"});
  EditInfo([](json& j) {
    j["codebase_version"] = "v2.1";
    j.erase("fps");
  });
  ExpectRefused({"meta/info.json", "fps"});
  EditInfo([](json& j) {
    j["fps"] = 10;
    j["data_path"] = "../outside/{episode_index}.parquet";
  });
  ExpectRefused({"meta/info.json data_path", "leaves the dataset directory"});
  std::ofstream(in_ + "/meta/info.json", std::ios::trunc) << "{\"codebase_version\": ";
  ExpectRefused({"meta/info.json", "not a JSON object"});
}

TEST_F(LerobotDatasetTest, TotalEpisodesMismatchIsRefused) {
  Make("v30");
  EditInfo([](json& j) { j["total_episodes"] = 4; });
  ExpectRefused({"total_episodes is 4", "lists 3"});
}

TEST_F(LerobotDatasetTest, OldEpisodesJsonlLayoutStillImports) {
  testing::VideoEpisodesSpec spec;
  spec.lengths = {5, 4};
  ASSERT_TRUE(testing::WriteVideoEpisodes(in_, spec).ok());
  auto r = ImportLerobot(in_, out_, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->episodes, 2u);
  EXPECT_EQ(r->manifest.source["type"], "video");
}

}  // namespace
}  // namespace storage
