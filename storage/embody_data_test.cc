// The embody-data tool end to end: import a robomimic file, inspect, verify, and a damaged
// shard found by verify with the file named; import video episodes and refuse a cut video.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "storage/manifest.h"
#include "storage/testing/episodes.h"
#include "storage/testing/robomimic_file.h"
#include "storage/testing/video_file.h"

namespace storage {
namespace {

namespace fs = std::filesystem;

struct ToolRun {
  int exit_code;
  std::string out, err;
};

ToolRun Tool(const std::string& dir, const std::string& args) {
  std::string cmd =
      std::string(EMBODY_DATA_BIN) + " " + args + " >" + dir + "/stdout 2>" + dir + "/stderr";
  int rc = std::system(cmd.c_str());
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, testing::ReadAll(dir + "/stdout"),
          testing::ReadAll(dir + "/stderr")};
}

TEST(EmbodyDataTest, ImportInspectVerifyAndCatchDamage) {
  std::string root = testing::MakeTempDir("embody_data_test");
  std::string in = root + "/in.hdf5", out = root + "/ds";
  testing::RobomimicFileSpec spec;
  spec.demos = 4;
  spec.masks = {{"train", {"demo_1", "demo_2"}}};
  ASSERT_TRUE(testing::WriteRobomimicFile(in, spec).ok());

  ToolRun imp =
      Tool(root, "import-hdf5 " + in + " " + out +
                     " --filter train --shard-mib 1 --patch 8 --language 'lift the cube'");
  ASSERT_EQ(imp.exit_code, 0) << imp.err;
  EXPECT_NE(imp.err.find("import: 2/2 demos (100%)"), std::string::npos) << imp.err;
  auto line = nlohmann::json::parse(imp.out);
  EXPECT_EQ(line["episodes"], 2);
  EXPECT_EQ(line["frames"], 24);
  EXPECT_GT(line["bytes"].get<uint64_t>(), 0u);
  EXPECT_TRUE(line.contains("seconds"));

  ToolRun inspect = Tool(root, "inspect " + out);
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  auto manifest = nlohmann::json::parse(inspect.out);
  EXPECT_EQ(manifest["stats"]["episodes"], 2);
  EXPECT_EQ(manifest["token_mapping"]["patch_size"], 8);
  EXPECT_EQ(manifest["source"]["language_instruction"], "lift the cube");

  ToolRun verify = Tool(root, "verify " + out);
  ASSERT_EQ(verify.exit_code, 0) << verify.err;
  EXPECT_EQ(nlohmann::json::parse(verify.out)["ok"], true);

  // A byte flipped in the middle of the shard's data: verify fails naming the shard.
  std::string shard = out + "/shard-00000.embs";
  testing::FlipByte(shard, fs::file_size(shard) / 3);
  verify = Tool(root, "verify " + out);
  EXPECT_EQ(verify.exit_code, 1);
  EXPECT_NE(verify.err.find(shard), std::string::npos) << verify.err;
  EXPECT_NE(verify.err.find("checksum mismatch"), std::string::npos) << verify.err;

  // Importing onto an existing directory is refused; a bad flag is a usage error.
  EXPECT_EQ(Tool(root, "import-hdf5 " + in + " " + out).exit_code, 1);
  EXPECT_EQ(Tool(root, "import-hdf5 " + in + " " + root + "/x --nan maybe").exit_code, 2);
  EXPECT_FALSE(fs::exists(root + "/x"));
  fs::remove_all(root);
}

TEST(EmbodyDataTest, ImportVideoEpisodes) {
  std::string root = testing::MakeTempDir("embody_data_test");
  std::string in = root + "/in", out = root + "/ds";
  testing::VideoEpisodesSpec spec;
  spec.lengths = {6, 9};
  ASSERT_TRUE(testing::WriteVideoEpisodes(in, spec).ok());

  ToolRun imp =
      Tool(root, "import-video " + in + " " + out + " --resize 24x32 --threads 1 --chunk-kib 8");
  ASSERT_EQ(imp.exit_code, 0) << imp.err;
  EXPECT_NE(imp.err.find("import: 2/2 episodes (100%)"), std::string::npos) << imp.err;
  auto line = nlohmann::json::parse(imp.out);
  EXPECT_EQ(line["episodes"], 2);
  EXPECT_EQ(line["frames"], 15);
  ToolRun inspect = Tool(root, "inspect " + out);
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  auto manifest = nlohmann::json::parse(inspect.out);
  EXPECT_EQ(manifest["source"]["type"], "video");
  bool found = false;
  for (const auto& k : manifest["keys"]) {
    if (k["name"] == "obs/top") {
      found = true;
      EXPECT_EQ(k["shape"], nlohmann::json({24, 32, 3}));
    }
  }
  EXPECT_TRUE(found) << inspect.out;
  EXPECT_EQ(Tool(root, "verify " + out).exit_code, 0);

  // A video cut short: exit 1, the file named, nothing written.
  std::string video = in + "/videos/wrist/episode_000001.mp4";
  fs::resize_file(video, fs::file_size(video) / 2);
  ToolRun bad = Tool(root, "import-video " + in + " " + root + "/x");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find(video), std::string::npos) << bad.err;
  EXPECT_FALSE(fs::exists(root + "/x"));
  EXPECT_EQ(Tool(root, "import-video " + in + " " + root + "/x --resize 24").exit_code, 2);
  EXPECT_FALSE(fs::exists(root + "/x"));
  fs::remove_all(root);
}

TEST(EmbodyDataTest, ImportLerobotV30) {
  const fs::path fixtures = EMBODY_LEROBOT_FIXTURES;
  if (!fs::exists(fixtures / "expected.json")) {
    GTEST_SKIP() << "LeRobot datasets from parquet-wasm were not generated (see "
                 << fixtures.parent_path() / "UNAVAILABLE"
                 << ")";
  }
  std::string root = testing::MakeTempDir("embody_data_test");
  std::string in = root + "/in", out = root + "/ds";
  fs::copy(fixtures / "v30", in, fs::copy_options::recursive);
  std::ifstream ein(fixtures / "expected.json");
  auto expected = nlohmann::json::parse(ein);
  const int h = expected["height"], w = expected["width"];
  testing::VideoWriteOptions vo;
  vo.fps = expected["fps"];
  for (const auto& v : expected["videos"]["v30"]) {
    std::vector<uint8_t> rgb;
    int64_t frames = 0;
    for (const auto& e : v["episodes"]) {
      int64_t n = expected["episodes"][e.get<size_t>()]["length"];
      auto f = testing::BlockFrames(e.get<uint64_t>() + 1, n, h, w);
      rgb.insert(rgb.end(), f.begin(), f.end());
      frames += n;
    }
    std::string path = in + "/" + v["path"].get<std::string>();
    fs::create_directories(fs::path(path).parent_path());
    ASSERT_TRUE(testing::WriteVideo(path, rgb.data(), frames, h, w, vo).ok());
  }
  ToolRun imp = Tool(root, "import-lerobot " + in + " " + out + " --threads 2");
  ASSERT_EQ(imp.exit_code, 0) << imp.err;
  EXPECT_NE(imp.err.find("import: 3/3 episodes (100%)"), std::string::npos) << imp.err;
  auto line = nlohmann::json::parse(imp.out);
  EXPECT_EQ(line["episodes"], 3);
  EXPECT_EQ(line["frames"], 28);
  ToolRun inspect = Tool(root, "inspect " + out);
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  EXPECT_EQ(nlohmann::json::parse(inspect.out)["source"]["codebase_version"], "v3.0");

  // A data file gone: exit 1, the file named, nothing written.
  std::string data = in + "/data/chunk-000/file-001.parquet";
  fs::remove(data);
  ToolRun bad = Tool(root, "import-lerobot " + in + " " + root + "/x");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find(data), std::string::npos) << bad.err;
  EXPECT_FALSE(fs::exists(root + "/x"));

  // A directory its user may not reach is said to be that, not missing, with the way out.
  ToolRun missing = Tool(root, "import-lerobot " + root + "/nowhere " + root + "/x");
  EXPECT_NE(missing.exit_code, 0) << missing.err;
  EXPECT_NE(missing.err.find(root + "/nowhere: No such file or directory"), std::string::npos)
      << missing.err;
  if (::geteuid() == 0 && std::system("command -v runuser >/dev/null 2>&1") == 0) {
    fs::permissions(root, fs::perms::owner_all);  // 0700: closed to everyone else
    const std::string cmd = "runuser -u nobody -- " + std::string(EMBODY_DATA_BIN) +
                            " import-lerobot " + in + " /tmp/never 2>&1";
    FILE* p = ::popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string text;
    char buf[512];
    while (size_t n = std::fread(buf, 1, sizeof buf, p)) text.append(buf, n);
    ::pclose(p);
    EXPECT_NE(text.find("cannot reach " + in + ": permission denied for uid"), std::string::npos)
        << text;
    EXPECT_NE(text.find("embody datasets upload NAME DIR --format lerobot"), std::string::npos)
        << text;
  }
  fs::remove_all(root);
}

}  // namespace
}  // namespace storage
