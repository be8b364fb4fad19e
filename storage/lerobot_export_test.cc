// The LeRobot v3.0 export: a dataset written here goes out, comes back in through our importer
// (actions and states exactly, camera frames within AV1's loss), and its Parquet files are read
// by an independent reader (parquet-wasm, storage/parquet/testdata/read_parquet.mjs), every
// value checked. Also: the layout and metadata LeRobot reads, rolling over to new data and
// video files, and that a refused or failed export leaves nothing behind.
#include "storage/lerobot_export.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "storage/dataset_reader.h"
#include "storage/dataset_writer.h"
#include "storage/lerobot_dataset.h"
#include "storage/testing/video_file.h"
#include "storage/video_encode.h"

namespace storage {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kFps = 10;
const std::vector<int64_t> kLengths = {12, 7, 9};
const std::vector<std::string> kTasks = {"put the cube in the bowl", "open the drawer",
                                         "put the cube in the bowl"};

json ReadJson(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return json::parse(s.str());
}

template <typename T>
Array MakeArray(const std::string& key, DType dtype, std::vector<int64_t> shape, int64_t frames,
                const std::vector<T>& values) {
  Array a;
  a.spec = {key, dtype, std::move(shape)};
  a.frames = frames;
  a.data.resize(values.size() * sizeof(T));
  std::memcpy(a.data.data(), values.data(), a.data.size());
  return a;
}

// Episode e: actions f64 (T, 7), obs/state f32 (T, 6), rewards f32 (T), cameras obs/top
// (48, 64) and obs/wrist (64, 64) of flat colour blocks, the task as language_instruction.
Episode MakeEpisode(int e) {
  const int64_t n = kLengths[e];
  std::vector<double> actions;
  std::vector<float> state, rewards;
  for (int64_t f = 0; f < n; ++f) {
    for (int k = 0; k < 7; ++k) actions.push_back(-(e * 100 + f) - k / 64.0 - 0.1);
    for (int k = 0; k < 6; ++k) state.push_back(static_cast<float>(e * 100 + f + k / 32.0));
    rewards.push_back(f == n - 1 ? 1.0f : 0.0f);
  }
  Episode ep;
  ep.arrays.push_back(MakeArray("actions", DType::kF64, {7}, n, actions));
  ep.arrays.push_back(MakeArray("obs/state", DType::kF32, {6}, n, state));
  ep.arrays.push_back(
      MakeArray("obs/top", DType::kU8, {48, 64, 3}, n, testing::BlockFrames(e * 2 + 1, n, 48, 64)));
  ep.arrays.push_back(MakeArray("obs/wrist", DType::kU8, {64, 64, 3}, n,
                                testing::BlockFrames(e * 2 + 2, n, 64, 64)));
  ep.arrays.push_back(MakeArray("rewards", DType::kF32, {}, n, rewards));
  std::sort(ep.arrays.begin(), ep.arrays.end(),
            [](const Array& a, const Array& b) { return a.spec.name < b.spec.name; });
  ep.attributes.emplace_back(kAttrDemoName, "demo_" + std::to_string(e));
  ep.attributes.emplace_back(kAttrLanguage, kTasks[e]);
  return ep;
}

class LerobotExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (AvailableAv1Encoders().empty()) GTEST_SKIP() << "this libavcodec has no AV1 encoder";
    testing::QuietVideoLogs();
    root_ = fs::temp_directory_path() / ("lerobot_export_test_" + std::to_string(getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
    auto w = DatasetWriter::Create(Path("dataset"), {});
    ASSERT_TRUE(w.ok()) << w.status().message();
    for (int e = 0; e < 3; ++e) {
      episodes_.push_back(MakeEpisode(e));
      ASSERT_TRUE((*w)->Add(episodes_.back(), "episode " + std::to_string(e)).ok());
    }
    ASSERT_TRUE((*w)->Finish({{"type", "test"}, {"fps", kFps}}).ok());
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string Path(const std::string& name) const { return (root_ / name).string(); }

  fs::path root_;
  std::vector<Episode> episodes_;
};

TEST_F(LerobotExportTest, ReimportGivesBackTheData) {
  std::vector<uint64_t> progress;
  LerobotExportOptions o;
  o.progress = [&](const ImportProgress& p) { progress.push_back(p.demos_done); };
  auto r = ExportLerobot(Path("dataset"), Path("out"), o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->episodes, 3);
  EXPECT_EQ(r->frames, 28);
  EXPECT_EQ(r->tasks, 2);
  EXPECT_EQ(r->fps, kFps);
  EXPECT_FALSE(r->video_encoder.empty());
  EXPECT_EQ(progress, (std::vector<uint64_t>{1, 2, 3}));
  // Only the result is there: the hidden work directory was renamed.
  int entries = 0;
  for (const auto& it : fs::directory_iterator(root_)) entries += it.path().filename() != "dataset";
  EXPECT_EQ(entries, 1);

  VideoEpisodesImportOptions io;
  auto back = ImportLerobot(Path("out"), Path("back"), io);
  ASSERT_TRUE(back.ok()) << back.status().message();
  auto ds = Dataset::Open(Path("back"));
  ASSERT_TRUE(ds.ok()) << ds.status().message();
  ASSERT_EQ((*ds)->episodes(), 3u);
  EXPECT_EQ((*ds)->manifest().source["codebase_version"], "v3.0");
  for (int e = 0; e < 3; ++e) {
    SCOPED_TRACE("episode " + std::to_string(e));
    auto got = (*ds)->ReadEpisode(e);
    ASSERT_TRUE(got.ok()) << got.status().message();
    const Episode& want = episodes_[e];
    EXPECT_EQ(got->Attribute(kAttrLanguage), kTasks[e]);
    const Array* actions = got->Find("actions");
    ASSERT_NE(actions, nullptr);
    ASSERT_EQ(actions->spec.dtype, DType::kF32);
    const double* a0 = reinterpret_cast<const double*>(want.Find("actions")->data.data());
    const float* a1 = reinterpret_cast<const float*>(actions->data.data());
    for (int64_t i = 0; i < kLengths[e] * 7; ++i) ASSERT_EQ(a1[i], static_cast<float>(a0[i])) << i;
    const Array* state = got->Find("obs/state");
    ASSERT_NE(state, nullptr);
    EXPECT_EQ(state->data, want.Find("obs/state")->data);
    for (const char* cam : {"obs/top", "obs/wrist"}) {
      const Array* img = got->Find(cam);
      ASSERT_NE(img, nullptr) << cam;
      const Array* orig = want.Find(cam);
      ASSERT_EQ(img->spec.frame_shape, orig->spec.frame_shape) << cam;
      auto d = testing::CompareBlockFrames(img->data.data(), orig->data.data(), kLengths[e],
                                           static_cast<int>(orig->spec.frame_shape[0]),
                                           static_cast<int>(orig->spec.frame_shape[1]));
      EXPECT_LT(d.mean, 4.0) << cam;
      EXPECT_LE(d.max_block_centre, 12) << cam;
    }
  }
}

TEST_F(LerobotExportTest, MetadataIsWhatLerobotReads) {
  auto r = ExportLerobot(Path("dataset"), Path("out"), {});
  ASSERT_TRUE(r.ok()) << r.status().message();
  const json info = ReadJson(Path("out/meta/info.json"));
  EXPECT_EQ(info["codebase_version"], "v3.0");
  EXPECT_EQ(info["fps"], kFps);
  EXPECT_EQ(info["total_episodes"], 3);
  EXPECT_EQ(info["total_frames"], 28);
  EXPECT_EQ(info["total_tasks"], 2);
  EXPECT_EQ(info["chunks_size"], 1000);
  EXPECT_EQ(info["data_path"], "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet");
  EXPECT_EQ(info["video_path"],
            "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4");
  const json& f = info["features"];
  EXPECT_EQ(f["action"]["dtype"], "float32");
  EXPECT_EQ(f["action"]["shape"], json::array({7}));
  EXPECT_EQ(f["action"]["names"].size(), 7u);
  EXPECT_EQ(f["observation.state"]["shape"], json::array({6}));
  EXPECT_EQ(f["rewards"]["shape"], json::array({1}));
  EXPECT_EQ(f["observation.images.top"]["dtype"], "video");
  EXPECT_EQ(f["observation.images.top"]["shape"], json::array({48, 64, 3}));
  EXPECT_EQ(f["observation.images.wrist"]["info"]["video.codec"], "av1");
  EXPECT_EQ(f["observation.images.wrist"]["info"]["video.pix_fmt"], "yuv420p");
  EXPECT_EQ(f["index"]["dtype"], "int64");
  EXPECT_EQ(f["timestamp"]["dtype"], "float32");

  const json stats = ReadJson(Path("out/meta/stats.json"));
  EXPECT_EQ(stats["action"]["count"], json::array({28}));
  EXPECT_EQ(stats["action"]["min"].size(), 7u);
  EXPECT_DOUBLE_EQ(stats["action"]["max"][0].get<double>(), static_cast<float>(-0.1));
  EXPECT_DOUBLE_EQ(stats["observation.state"]["min"][1].get<double>(), 1 / 32.0);
  EXPECT_DOUBLE_EQ(stats["index"]["max"][0].get<double>(), 27);
  // Images per channel in [0, 1], shape (3, 1, 1).
  const json& img = stats["observation.images.top"];
  ASSERT_EQ(img["mean"].size(), 3u);
  const double m = img["mean"][0][0][0].get<double>();
  EXPECT_GT(m, 0.0);
  EXPECT_LT(m, 1.0);

  for (const char* p :
       {"data/chunk-000/file-000.parquet", "meta/tasks.parquet",
        "meta/episodes/chunk-000/file-000.parquet",
        "videos/observation.images.top/chunk-000/file-000.mp4",
        "videos/observation.images.wrist/chunk-000/file-000.mp4"}) {
    EXPECT_TRUE(fs::is_regular_file(Path("out") + "/" + p)) << p;
  }
  // The concatenated video holds every frame, at the dataset's rate, in AV1.
  auto v = DecodeVideo(Path("out/videos/observation.images.wrist/chunk-000/file-000.mp4"));
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(v->frames, 28);
  EXPECT_NEAR(v->fps, kFps, 0.01);
  EXPECT_NE(v->codec.find("av1"), std::string::npos) << v->codec;
}

TEST_F(LerobotExportTest, SmallFileLimitsRollOverToNewFilesAndChunks) {
  LerobotExportOptions o;
  o.data_files_size_in_mb = 1;   // every episode is far below: one file...
  o.video_files_size_in_mb = 1;
  o.chunks_size = 2;
  // ...so force the rollover with a dataset whose episodes are each over a MiB of values.
  auto w = DatasetWriter::Create(Path("big"), {});
  ASSERT_TRUE(w.ok());
  for (int e = 0; e < 3; ++e) {
    const int64_t n = 80;  // x 4096 floats: 1.25 MiB
    std::vector<float> actions(static_cast<size_t>(n) * 4096, static_cast<float>(e));
    Episode ep;
    ep.arrays.push_back(MakeArray("actions", DType::kF32, {4096}, n, actions));
    ASSERT_TRUE((*w)->Add(ep, "e").ok());
  }
  ASSERT_TRUE((*w)->Finish({{"type", "test"}}).ok());
  o.fps = 15;
  auto r = ExportLerobot(Path("big"), Path("out"), o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->data_files, 3);
  EXPECT_TRUE(fs::exists(Path("out/data/chunk-000/file-000.parquet")));
  EXPECT_TRUE(fs::exists(Path("out/data/chunk-000/file-001.parquet")));
  EXPECT_TRUE(fs::exists(Path("out/data/chunk-001/file-000.parquet")));
  const json info = ReadJson(Path("out/meta/info.json"));
  EXPECT_EQ(info["fps"], 15);
  EXPECT_TRUE(info["video_path"].is_null());
  auto layout = ReadLerobotLayout(Path("out"), {});
  ASSERT_TRUE(layout.ok()) << layout.status().message();
  ASSERT_EQ(layout->episodes.size(), 3u);
  EXPECT_EQ(layout->episodes[2].data_path, Path("out") + "/data/chunk-001/file-000.parquet");
  EXPECT_EQ(layout->episodes[2].from_index, 160);
  LerobotDataFiles files(2);
  auto frames = files.Read(*layout, layout->episodes[2]);
  ASSERT_TRUE(frames.ok()) << frames.status().message();
  EXPECT_EQ(frames->action[0], 2.0f);
}

TEST_F(LerobotExportTest, RefusesAnOccupiedOutputAndLeavesNothingOnFailure) {
  fs::create_directories(Path("out"));
  std::ofstream(Path("out/keep")) << "x";
  auto r = ExportLerobot(Path("dataset"), Path("out"), {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not an empty directory"), std::string::npos);
  EXPECT_TRUE(fs::exists(Path("out/keep")));

  // An empty directory is taken.
  fs::create_directories(Path("empty"));
  EXPECT_TRUE(ExportLerobot(Path("dataset"), Path("empty"), {}).ok());
  EXPECT_TRUE(fs::exists(Path("empty/meta/info.json")));

  // No frame rate: refused before anything is written.
  auto w = DatasetWriter::Create(Path("nofps"), {});
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Add(episodes_[0], "e").ok());
  ASSERT_TRUE((*w)->Finish({{"type", "test"}}).ok());
  r = ExportLerobot(Path("nofps"), Path("out2"), {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--fps"), std::string::npos) << r.status().message();

  // A codec that fails mid-way (no such encoder) leaves no directory, hidden or not.
  LerobotExportOptions o;
  o.codec = "no-such-encoder";
  r = ExportLerobot(Path("dataset"), Path("out3"), o);
  ASSERT_FALSE(r.ok());
  for (const auto& it : fs::directory_iterator(root_)) {
    const std::string name = it.path().filename().string();
    EXPECT_TRUE(name == "dataset" || name == "out" || name == "empty" || name == "nofps") << name;
  }
}

// Each AV1 encoder this libavcodec has: frames added in several calls come back in order, at
// the rate given, within lossy coding's tolerance, frame by frame.
TEST(VideoEncoderTest, EveryAv1EncoderKeepsFramesInOrder) {
  testing::QuietVideoLogs();
  const std::string path =
      (fs::temp_directory_path() / ("video_encoder_test_" + std::to_string(getpid()) + ".mp4"))
          .string();
  for (const std::string& name : AvailableAv1Encoders()) {
    for (auto [h, w] : {std::pair{64, 64}, std::pair{48, 64}}) {
      SCOPED_TRACE(name + " " + std::to_string(h) + "x" + std::to_string(w));
      const int64_t n = 23;
      const std::vector<uint8_t> frames = testing::BlockFrames(7, n, h, w);
      auto enc = VideoEncoder::Open(path, h, w, {.codec = name, .fps = 15});
      if (!enc.ok() && name == "libsvtav1" && h < 64) continue;  // SVT-AV1's minimum size
      ASSERT_TRUE(enc.ok()) << enc.status().message();
      const size_t frame_bytes = static_cast<size_t>(h) * w * 3;
      ASSERT_TRUE((*enc)->Add(frames.data(), 10).ok());
      ASSERT_TRUE((*enc)->Add(frames.data() + 10 * frame_bytes, n - 10).ok());
      ASSERT_TRUE((*enc)->Finish().ok());
      EXPECT_EQ((*enc)->frames(), n);
      EXPECT_GT((*enc)->bytes(), 0);
      auto v = DecodeVideo(path);
      ASSERT_TRUE(v.ok()) << v.status().message();
      ASSERT_EQ(v->frames, n);
      EXPECT_NEAR(v->fps, 15, 0.01);
      for (int64_t f = 0; f < n; ++f) {
        auto d = testing::CompareBlockFrames(v->rgb.data() + f * frame_bytes,
                                             frames.data() + f * frame_bytes, 1, h, w);
        // Consecutive frames differ by at least 29 levels: a frame out of place shows.
        EXPECT_LE(d.max_block_centre, 20) << "frame " << f;
      }
    }
  }
  fs::remove(path);
}

// ---- the independent reader ------------------------------------------------------------------

json ReadWithParquetWasm(const std::string& path) {
  const std::string cmd = "node '" + std::string(EMBODY_PARQUET_NODE_READER) + "' '" + path + "'";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return nullptr;
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  if (pclose(p) != 0) return nullptr;
  return json::parse(out);
}

TEST_F(LerobotExportTest, ParquetWasmReadsTheExportedFiles) {
  if (fs::exists(fs::path(EMBODY_PARQUET_GENERATED) / "UNAVAILABLE") ||
      !fs::exists(EMBODY_PARQUET_NODE_READER)) {
    GTEST_SKIP() << "parquet-wasm is not installed (build the target parquet_fixtures)";
  }
  ASSERT_TRUE(ExportLerobot(Path("dataset"), Path("out"), {}).ok());

  const json data = ReadWithParquetWasm(Path("out/data/chunk-000/file-000.parquet"));
  ASSERT_FALSE(data.is_null());
  ASSERT_EQ(data["num_rows"], 28);
  EXPECT_EQ(data["fields"]["action"], "List<Float32>");
  EXPECT_EQ(data["fields"]["observation.state"], "List<Float32>");
  EXPECT_EQ(data["fields"]["rewards"], "Float32");
  EXPECT_EQ(data["fields"]["timestamp"], "Float32");
  EXPECT_EQ(data["fields"]["index"], "Int64");
  const json& c = data["columns"];
  int64_t row = 0;
  for (int e = 0; e < 3; ++e) {
    const double* a = reinterpret_cast<const double*>(episodes_[e].Find("actions")->data.data());
    const float* s = reinterpret_cast<const float*>(episodes_[e].Find("obs/state")->data.data());
    for (int64_t f = 0; f < kLengths[e]; ++f, ++row) {
      SCOPED_TRACE("episode " + std::to_string(e) + " frame " + std::to_string(f));
      ASSERT_EQ(c["episode_index"][row], e);
      ASSERT_EQ(c["frame_index"][row], f);
      ASSERT_EQ(c["index"][row], row);
      ASSERT_EQ(c["task_index"][row], e == 1 ? 1 : 0);
      ASSERT_EQ(c["timestamp"][row].get<double>(), static_cast<double>(static_cast<float>(f / 10.0)));
      ASSERT_EQ(c["rewards"][row].get<double>(), f == kLengths[e] - 1 ? 1.0 : 0.0);
      for (int k = 0; k < 7; ++k) {
        ASSERT_EQ(c["action"][row][k].get<double>(), static_cast<double>(static_cast<float>(a[f * 7 + k])));
      }
      for (int k = 0; k < 6; ++k) {
        ASSERT_EQ(c["observation.state"][row][k].get<double>(), static_cast<double>(s[f * 6 + k]));
      }
    }
  }

  const json tasks = ReadWithParquetWasm(Path("out/meta/tasks.parquet"));
  ASSERT_FALSE(tasks.is_null());
  EXPECT_EQ(tasks["columns"]["task"], json::array({kTasks[0], kTasks[1]}));
  EXPECT_EQ(tasks["columns"]["task_index"], json::array({0, 1}));
  EXPECT_TRUE(tasks["metadata"].contains("pandas"));

  const json eps = ReadWithParquetWasm(Path("out/meta/episodes/chunk-000/file-000.parquet"));
  ASSERT_FALSE(eps.is_null());
  const json& m = eps["columns"];
  EXPECT_EQ(eps["fields"]["tasks"], "List<Utf8>");
  EXPECT_EQ(m["episode_index"], json::array({0, 1, 2}));
  EXPECT_EQ(m["length"], json::array({12, 7, 9}));
  EXPECT_EQ(m["tasks"], json::array({json::array({kTasks[0]}), json::array({kTasks[1]}),
                                     json::array({kTasks[2]})}));
  EXPECT_EQ(m["dataset_from_index"], json::array({0, 12, 19}));
  EXPECT_EQ(m["dataset_to_index"], json::array({12, 19, 28}));
  EXPECT_EQ(m["data/file_index"], json::array({0, 0, 0}));
  for (const char* cam : {"observation.images.top", "observation.images.wrist"}) {
    const std::string p = std::string("videos/") + cam + "/";
    EXPECT_EQ(eps["fields"][p + "from_timestamp"], "Float64");
    EXPECT_EQ(m[p + "from_timestamp"], json::array({0.0, 1.2, 1.9}));
    EXPECT_EQ(m[p + "to_timestamp"], json::array({1.2, 1.9, 2.8}));
    EXPECT_EQ(m[p + "file_index"], json::array({0, 0, 0}));
  }
}

}  // namespace
}  // namespace storage
