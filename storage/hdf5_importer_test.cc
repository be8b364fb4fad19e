// HDF5 import: robomimic/LIBERO files made here with the HDF5 C API go into shards and come
// back bit for bit; every kind of bad data is refused naming the file and the demo, and leaves
// no output behind.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include <gtest/gtest.h>

#include "storage/dataset_reader.h"
#include "storage/hdf5_importer.h"
#include "storage/testing/robomimic_file.h"

namespace storage {
namespace {

namespace fs = std::filesystem;
using testing::Hdf5Writer;
using testing::RobomimicFileSpec;
using testing::WriteRobomimicFile;

class Hdf5ImporterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::MakeTempDir("hdf5_importer_test");
    in_ = root_ + "/in.hdf5";
    out_ = root_ + "/out";
  }
  void TearDown() override { fs::remove_all(root_); }

  std::vector<Episode> Make(RobomimicFileSpec spec = {}) {
    auto eps = WriteRobomimicFile(in_, spec);
    EXPECT_TRUE(eps.ok()) << eps.status().ToString();
    return eps.ok() ? *eps : std::vector<Episode>{};
  }
  Hdf5Writer Edit() {
    auto w = Hdf5Writer::OpenForEdit(in_);
    EXPECT_TRUE(w.ok());
    return std::move(*w);
  }
  // Imports, expects a refusal whose message names the file and `demo`, and checks that the
  // output directory (and no temporary one) exists afterwards.
  void ExpectRefused(const std::string& demo, const std::string& reason,
                     Hdf5ImportOptions options = {}) {
    auto r = ImportHdf5(in_, out_, options);
    ASSERT_FALSE(r.ok()) << "imported, expected: " << reason;
    const std::string& m = r.status().message();
    EXPECT_NE(m.find(in_), std::string::npos) << m;
    if (!demo.empty()) {
      EXPECT_NE(m.find(demo + ":"), std::string::npos) << m;
    }
    EXPECT_NE(m.find(reason), std::string::npos) << m;
    std::vector<std::string> left;
    for (const auto& e : fs::directory_iterator(root_)) left.push_back(e.path().filename());
    EXPECT_EQ(left, std::vector<std::string>{"in.hdf5"}) << "output left behind";
  }
  void ExpectSame(const std::vector<Episode>& want, const Dataset& ds) {
    ASSERT_EQ(ds.episodes(), want.size());
    for (size_t e = 0; e < want.size(); ++e) {
      auto got = ds.ReadEpisode(e);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ASSERT_EQ(got->arrays.size(), want[e].arrays.size());
      for (size_t k = 0; k < want[e].arrays.size(); ++k) {
        EXPECT_EQ(got->arrays[k].spec, want[e].arrays[k].spec);
        EXPECT_TRUE(got->arrays[k].data == want[e].arrays[k].data)
            << "episode " << e << " key " << want[e].arrays[k].spec.name;
      }
      EXPECT_EQ(got->attributes, want[e].attributes);
    }
  }

  std::string root_, in_, out_;
};

TEST_F(Hdf5ImporterTest, RoundTripIsBitForBitAcrossShards) {
  RobomimicFileSpec spec;
  spec.demos = 12;
  spec.frames_per_demo = {5, 9, 13, 2, 20, 7, 7, 31, 1, 4, 16, 8};
  auto want = Make(spec);
  Hdf5ImportOptions o;
  o.writer.shard_bytes = 32 << 10;
  o.writer.shard.chunk_bytes = 4 << 10;
  int progress_calls = 0;
  o.progress = [&](const ImportProgress& p) {
    ++progress_calls;
    EXPECT_EQ(p.demos_total, 12u);
  };
  auto r = ImportHdf5(in_, out_, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(progress_calls, 12);
  EXPECT_EQ(r->episodes, 12u);
  EXPECT_EQ(r->frames, 123u);
  EXPECT_GT(r->manifest.shards.size(), 3u);
  auto ds = Dataset::Open(out_);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  ExpectSame(want, **ds);
  // next_obs is left out; robomimic's int64 dones arrive as i32; env_args is kept verbatim.
  for (const KeySpec& k : (*ds)->schema()) EXPECT_EQ(k.name.find("next_obs"), std::string::npos);
  EXPECT_EQ((*ds)->manifest().source["env_args"], spec.env_args);
  EXPECT_EQ((*ds)->manifest().stats.frames, 123u);
  EXPECT_TRUE((*ds)->Verify().ok());
}

TEST_F(Hdf5ImporterTest, CompressedFileAndFloat32Actions) {
  RobomimicFileSpec spec;
  spec.gzip = 4;
  spec.f32_actions = true;
  spec.cameras = 1;
  auto want = Make(spec);
  auto r = ImportHdf5(in_, out_, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto ds = Dataset::Open(out_);
  ASSERT_TRUE(ds.ok());
  ExpectSame(want, **ds);
}

TEST_F(Hdf5ImporterTest, DemosComeInNumericOrder) {
  RobomimicFileSpec spec;
  spec.demo_names = {"demo_10", "demo_2", "demo_1", "demo_0"};
  spec.frames_per_demo = {4, 3, 2, 1};
  auto want = Make(spec);
  ASSERT_TRUE(ImportHdf5(in_, out_, {}).ok());
  auto ds = Dataset::Open(out_);
  ASSERT_TRUE(ds.ok());
  std::vector<std::string> order;
  for (uint64_t e = 0; e < (*ds)->episodes(); ++e) {
    for (const auto& [k, v] : (*ds)->EpisodeAttributes(e)) {
      if (k == kAttrDemoName) order.push_back(v);
    }
  }
  EXPECT_EQ(order, (std::vector<std::string>{"demo_0", "demo_1", "demo_2", "demo_10"}));
  ExpectSame(want, **ds);
}

TEST_F(Hdf5ImporterTest, LiberoLanguageFromProblemInfoOrFromTheCaller) {
  RobomimicFileSpec spec;
  spec.problem_info =
      R"({"problem_name": "kitchen", "language_instruction": "open the top drawer"})";
  auto want = Make(spec);
  Hdf5ImportOptions o;
  o.writer.mapping.patch_size = 8;  // 16x16 images: 4 patches each
  o.writer.mapping.action_horizon = 16;
  auto r = ImportHdf5(in_, out_, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto ds = Dataset::Open(out_);
  ASSERT_TRUE(ds.ok());
  ExpectSame(want, **ds);
  EXPECT_EQ((*ds)->manifest().source["language_instruction"], "open the top drawer");
  // 4 words + 2 cameras · 4 patches + 1 proprio + 16 actions
  EXPECT_EQ((*ds)->SampleTokens(0), 4u + 8 + 1 + 16);
  EXPECT_EQ((*ds)->manifest().stats.token_histogram.at(29), (*ds)->samples());

  fs::remove_all(out_);
  o.language = "pick it up";
  ASSERT_TRUE(ImportHdf5(in_, out_, o).ok());
  ds = Dataset::Open(out_);
  ASSERT_TRUE(ds.ok());
  auto ep = (*ds)->ReadEpisode(1);
  ASSERT_TRUE(ep.ok());
  EXPECT_EQ(ep->Attribute(kAttrLanguage), "pick it up");
  EXPECT_EQ((*ds)->SampleTokens(0), 3u + 8 + 1 + 16);
}

TEST_F(Hdf5ImporterTest, FilterKeyImportsOnlyItsDemos) {
  RobomimicFileSpec spec;
  spec.demos = 5;
  spec.masks = {{"train", {"demo_3", "demo_0", "demo_4"}}, {"valid", {"demo_1"}}};
  auto all = Make(spec);
  Hdf5ImportOptions o;
  o.filter = "train";
  auto r = ImportHdf5(in_, out_, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto ds = Dataset::Open(out_);
  ASSERT_TRUE(ds.ok());
  ExpectSame({all[0], all[3], all[4]}, **ds);
  EXPECT_EQ((*ds)->manifest().source["filter"], "train");
  fs::remove_all(out_);
  o.filter = "test";
  ExpectRefused("", "no filter key mask/test (filters: train, valid)", o);
}

TEST_F(Hdf5ImporterTest, RefusesAFileWithoutDataGroup) {
  {
    auto w = Hdf5Writer::Create(in_);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w->CreateGroup("mask").ok());
  }
  ExpectRefused("", "no 'data' group");
}

TEST_F(Hdf5ImporterTest, RefusesADemoWithoutActions) {
  Make();
  ASSERT_TRUE(Edit().Delete("data/demo_1/actions").ok());
  ExpectRefused("demo_1", "no actions");
}

TEST_F(Hdf5ImporterTest, RefusesAKeyWhoseFrameCountDiffersFromActions) {
  Make();
  {
    Hdf5Writer w = Edit();
    ASSERT_TRUE(w.Delete("data/demo_2/rewards").ok());
    std::vector<double> r(13, 0.0);
    ASSERT_TRUE(w.WriteDataset("data/demo_2/rewards", Hdf5Writer::Type::kF64, {13}, r.data()).ok());
  }
  ExpectRefused("demo_2", "rewards has 13 frames, actions has 12");
}

TEST_F(Hdf5ImporterTest, RefusesMisshapedKeys) {
  struct Case {
    std::string path;
    std::vector<int64_t> dims;
    Hdf5Writer::Type type;
    std::string reason;
  };
  std::vector<Case> cases = {
      {"data/demo_1/actions", {12}, Hdf5Writer::Type::kF64, "actions must be (T, action_dim)"},
      {"data/demo_1/obs/agentview_image",
       {12, 16, 16},
       Hdf5Writer::Type::kU8,
       "image key obs/agentview_image must be (T, H, W, C)"},
      {"data/demo_1/obs/agentview_image",
       {12, 16, 16, 3},
       Hdf5Writer::Type::kF32,
       "image key obs/agentview_image must be uint8"},
      {"data/demo_1/dones", {12, 2}, Hdf5Writer::Type::kI64, "dones must be (T)"},
      {"data/demo_1/obs/robot0_eef_pos",
       {12, 4},
       Hdf5Writer::Type::kF64,
       "differs from the first demo's obs/robot0_eef_pos f64 (3)"},
      {"data/demo_1/obs/extra",
       {12, 2},
       Hdf5Writer::Type::kF64,
       "obs/extra is not in the first demo"},
      {"data/demo_0/obs/scalar", {}, Hdf5Writer::Type::kF64, "obs/scalar is a scalar"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.reason);
    Make();
    {
      Hdf5Writer w = Edit();
      (void)w.Delete(c.path);
      int64_t n = 1;
      for (int64_t d : c.dims) n *= d;
      std::vector<double> zeros(static_cast<size_t>(n) + 1, 0.0);  // big enough for any type
      ASSERT_TRUE(w.WriteDataset(c.path, c.type, c.dims, zeros.data()).ok());
    }
    ExpectRefused(c.path.substr(5, 6), c.reason);  // the demo of the path
  }
  Make();
  ASSERT_TRUE(Edit().Delete("data/demo_2/obs/robot0_gripper_qpos").ok());
  ExpectRefused("demo_2", "key obs/robot0_gripper_qpos is missing");
}

TEST_F(Hdf5ImporterTest, RefusesIntegersThatDoNotFit) {
  Make();
  {
    Hdf5Writer w = Edit();
    ASSERT_TRUE(w.Delete("data/demo_0/dones").ok());
    std::vector<int64_t> d(12, 0);
    d[5] = int64_t{1} << 40;
    ASSERT_TRUE(w.WriteDataset("data/demo_0/dones", Hdf5Writer::Type::kI64, {12}, d.data()).ok());
  }
  ExpectRefused("demo_0", "does not fit in i32");
}

TEST_F(Hdf5ImporterTest, NonFiniteActionsAreRefusedOrTheDemoSkipped) {
  auto want = Make();
  {
    Hdf5Writer w = Edit();
    ASSERT_TRUE(w.Delete("data/demo_1/actions").ok());
    std::vector<double> a(12 * 7, 0.5);
    a[3 * 7 + 2] = std::numeric_limits<double>::quiet_NaN();
    ASSERT_TRUE(
        w.WriteDataset("data/demo_1/actions", Hdf5Writer::Type::kF64, {12, 7}, a.data()).ok());
  }
  ExpectRefused("demo_1", "actions frame 3 element 2 is NaN or Inf");
  Hdf5ImportOptions o;
  o.nan_policy = NanPolicy::kSkip;
  auto r = ImportHdf5(in_, out_, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->skipped_nan, 1u);
  EXPECT_EQ(r->episodes, 2u);
  auto ds = Dataset::Open(out_);
  ASSERT_TRUE(ds.ok());
  ExpectSame({want[0], want[2]}, **ds);
  EXPECT_EQ((*ds)->manifest().source["skipped_nan_demos"], 1);
}

TEST_F(Hdf5ImporterTest, RefusesAnEpisodeLongerThanTheMaximum) {
  RobomimicFileSpec spec;
  spec.frames_per_demo = {5, 30, 5};
  Make(spec);
  Hdf5ImportOptions o;
  o.max_episode_frames = 20;
  ExpectRefused("demo_1", "30 frames, more than the maximum of 20", o);
}

TEST_F(Hdf5ImporterTest, RefusesANumSamplesAttributeThatDisagrees) {
  Make();
  ASSERT_TRUE(Edit().WriteIntAttribute("data/demo_2", "num_samples", 11).ok());
  ExpectRefused("demo_2", "num_samples attribute says 11 frames");
}

TEST_F(Hdf5ImporterTest, AMissingFileIsSaidWithTheSystemsReason) {
  auto r = ImportHdf5(root_ + "/nowhere.hdf5", out_, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), common::Code::kNotFound);
  EXPECT_NE(r.status().message().find(root_ + "/nowhere.hdf5: cannot read: No such file"),
            std::string::npos)
      << r.status().message();
  EXPECT_FALSE(fs::exists(out_));
}

TEST_F(Hdf5ImporterTest, RefusesSomethingThatIsNotHdf5) {
  { std::ofstream(in_) << "not hdf5"; }
  ExpectRefused("", "not an HDF5 file");
}

}  // namespace
}  // namespace storage
