// LeRobot's recorded statistics against the import's own: the comparison on numbers made here
// (agreeing to float noise, disagreeing, a mean near zero, a width that differs), the reading of
// both files (v2.1's per-episode lines aggregated the way LeRobot aggregates them), and whole
// imports of the generated v2.1 and v3.0 datasets with their statistics as written, and with
// statistics that disagree: a warning in the manifest's source, never a failed import.
#include "storage/lerobot_stats.h"

#include <cmath>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "storage/dataset_reader.h"
#include "storage/lerobot_dataset.h"
#include "storage/testing/lerobot_fixture.h"
#include "storage/testing/robomimic_file.h"

namespace storage {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

KeyStats Key(const std::string& name, std::vector<double> min, std::vector<double> max,
             std::vector<double> mean, std::vector<double> std) {
  KeyStats k;
  k.spec = {name, DType::kF32, {static_cast<int64_t>(mean.size())}};
  k.min = std::move(min);
  k.max = std::move(max);
  k.mean = std::move(mean);
  k.std = std::move(std);
  return k;
}

LerobotFeatureStats Feature(std::vector<double> min, std::vector<double> max,
                            std::vector<double> mean, std::vector<double> std) {
  return {std::move(min), std::move(max), std::move(mean), std::move(std), 10};
}

TEST(LerobotStatsTest, AgreeingStatisticsPassAndDisagreeingOnesAreNamed) {
  DatasetStats ours;
  ours.keys.push_back(Key("actions", {-1, 0}, {1, 2}, {0.5, 1.0}, {0.25, 0.5}));
  ours.keys.push_back(Key("obs/state", {0}, {4}, {2}, {1}));
  LerobotRecordedStats recorded;
  recorded.file = "meta/stats.json";
  // LeRobot's float32 arithmetic: differences in the 7th digit.
  recorded.features["action"] =
      Feature({-1, 0}, {1, 2.0000001}, {0.50000003, 1.0}, {0.25000001, 0.5});
  recorded.features["observation.state"] = Feature({0}, {4}, {2}, {1});
  json check = CompareLerobotStats(recorded, ours);
  EXPECT_TRUE(check["ok"]) << check.dump();
  EXPECT_EQ(check["compared"], json({"actions", "obs/state"}));
  EXPECT_EQ(check["file"], "meta/stats.json");
  EXPECT_EQ(check["tolerance"], kLerobotStatsTolerance);
  EXPECT_LT(check["max_rel_diff"].get<double>(), 1e-6);
  EXPECT_FALSE(check.contains("mismatches"));

  // One mean off by 2% of its std: a mismatch that names the key, the dimension and the file.
  recorded.features["action"].mean[1] = 1.0 + 0.02 * 0.5;
  check = CompareLerobotStats(recorded, ours);
  EXPECT_FALSE(check["ok"]);
  EXPECT_EQ(check["worst"], "actions[1] mean");
  EXPECT_NEAR(check["max_rel_diff"].get<double>(), 0.01 / 1.01, 1e-9);
  ASSERT_EQ(check["mismatches"].size(), 1u) << check.dump();
  const std::string m = check["mismatches"][0];
  EXPECT_NE(m.find("actions[1] mean: 1 here, 1.01 in meta/stats.json"), std::string::npos) << m;
  EXPECT_EQ(check["mismatch_count"], 1);
}

TEST(LerobotStatsTest, AMeanNearZeroIsJudgedByTheSpreadOfItsDimension) {
  DatasetStats ours;
  ours.keys.push_back(Key("actions", {-3}, {3}, {1e-9}, {1}));
  LerobotRecordedStats recorded;
  recorded.file = "meta/stats.json";
  recorded.features["action"] = Feature({-3}, {3}, {2e-9}, {1});
  EXPECT_TRUE(CompareLerobotStats(recorded, ours)["ok"]);
  // A width that differs is a mismatch of its own.
  recorded.features["action"] = Feature({-3, 0}, {3, 0}, {0, 0}, {1, 1});
  json check = CompareLerobotStats(recorded, ours);
  EXPECT_FALSE(check["ok"]);
  EXPECT_NE(check["mismatches"][0].get<std::string>().find(
                "actions: 1 values here, 2 in meta/stats.json"),
            std::string::npos)
      << check.dump();
  // A feature LeRobot did not record is not compared.
  recorded.features.clear();
  check = CompareLerobotStats(recorded, ours);
  EXPECT_TRUE(check["ok"]);
  EXPECT_EQ(check["compared"], json::array());
}

class LerobotStatsFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("lerobot_stats_test");
    fs::create_directories(dir_ + "/meta");
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& rel, const std::string& text) {
    std::ofstream(dir_ + "/" + rel, std::ios::trunc) << text;
  }
  std::string dir_;
};

TEST_F(LerobotStatsFilesTest, EpisodeLinesAggregateAsLerobotDoes) {
  // Two episodes of one dimension: {1, 3} and {5, 7, 9}; over all five frames the mean is 5,
  // the population variance (16 + 4 + 0 + 4 + 16) / 5 = 8.
  Write(
      "meta/episodes_stats.jsonl",
      R"({"episode_index": 0, "stats": {"action": {"min": [1], "max": [3], "mean": [2], "std": [1], "count": [2]}, "observation.images.top": {"min": [[[0]]]}}})"
      "\n\n"
      R"({"episode_index": 1, "stats": {"action": {"min": [5], "max": [9], "mean": [7], "std": [1.632993161855452], "count": [3]}}})"
      "\n");
  auto r = ReadLerobotStats(dir_, "v2.1");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(*r);
  EXPECT_EQ((*r)->file, "meta/episodes_stats.jsonl");
  ASSERT_EQ((*r)->features.count("action"), 1u);
  EXPECT_EQ((*r)->features.count("observation.state"), 0u);
  const LerobotFeatureStats& a = (*r)->features.at("action");
  EXPECT_EQ(a.count, 5);
  EXPECT_EQ(a.min, std::vector<double>{1});
  EXPECT_EQ(a.max, std::vector<double>{9});
  EXPECT_NEAR(a.mean[0], 5, 1e-12);
  EXPECT_NEAR(a.std[0], std::sqrt(8.0), 1e-12);
}

TEST_F(LerobotStatsFilesTest, MissingMalformedAndPartialFiles) {
  auto none = ReadLerobotStats(dir_, "v3.0");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(*none);
  Write("meta/stats.json",
        "{\"action\": {\"min\": [1], \"max\": [\"x\"], \"mean\": [1], "
        "\"std\": [0]}}");
  auto bad = ReadLerobotStats(dir_, "v3.0");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(dir_ + "/meta/stats.json: action"), std::string::npos)
      << bad.status().message();
  Write("meta/stats.json", "NaN");
  EXPECT_FALSE(ReadLerobotStats(dir_, "v3.0").ok());
  // An episode line without count cannot be weighed.
  Write("meta/episodes_stats.jsonl",
        R"({"stats": {"action": {"min": [1], "max": [3], "mean": [2], "std": [1]}}})");
  bad = ReadLerobotStats(dir_, "v2.1");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("episodes_stats.jsonl line 1: action: no count"),
            std::string::npos)
      << bad.status().message();
  // A feature some episodes lack describes only part of the dataset: not compared.
  Write("meta/episodes_stats.jsonl",
        R"({"stats": {"action": {"min": [1], "max": [3], "mean": [2], "std": [1], "count": [2]}}})"
        "\n"
        R"({"stats": {}})");
  auto partial = ReadLerobotStats(dir_, "v2.1");
  ASSERT_TRUE(partial.ok()) << partial.status().message();
  EXPECT_TRUE((*partial)->features.empty());
}

// ---- whole imports of the generated datasets ------------------------------------------------

class LerobotStatsImportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto f = testing::FindLerobotFixtures(EMBODY_LEROBOT_FIXTURES);
    if (!f.ok()) GTEST_SKIP() << f.status().message();
    fixtures_ = *f;
    root_ = testing::MakeTempDir("lerobot_stats_import_test");
  }
  void TearDown() override {
    if (!root_.empty()) fs::remove_all(root_);
  }

  // Imports layout `version`, its stats file replaced by `bad` (from OUT_DIR/bad) when given;
  // returns the manifest's stats_check.
  json Import(const std::string& version, const std::string& stats_file = "",
              const std::string& bad = "") {
    const std::string in = root_ + "/" + version + (bad.empty() ? "" : "-bad");
    const std::string out = in + "-out";
    EXPECT_TRUE(testing::MakeLerobotDataset(fixtures_, version, in).ok());
    if (!bad.empty()) {
      fs::copy_file(fs::path(fixtures_.dir) / "bad" / bad, in + "/" + stats_file,
                    fs::copy_options::overwrite_existing);
    }
    auto r = ImportLerobot(in, out, {});
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (!r.ok()) return json();
    // What dataset.json on disk says, as the manifest sent to the control plane does.
    auto ds = Dataset::Open(out);
    EXPECT_TRUE(ds.ok());
    if (!ds.ok()) return json();
    EXPECT_EQ((*ds)->manifest().source["stats_check"], r->manifest.source["stats_check"]);
    return r->manifest.source.value("stats_check", json());
  }

  testing::LerobotFixtures fixtures_;
  std::string root_;
};

TEST_F(LerobotStatsImportTest, V30StatsJsonAgreesAndADoctoredOneIsAWarning) {
  json check = Import("v30");
  EXPECT_EQ(check["file"], "meta/stats.json");
  EXPECT_EQ(check["compared"], json({"actions", "obs/state"}));
  EXPECT_TRUE(check["ok"]) << check.dump();
  EXPECT_LT(check["max_rel_diff"].get<double>(), 1e-6) << check.dump();

  check = Import("v30", "meta/stats.json", "v30_stats_disagree.json");
  EXPECT_FALSE(check["ok"]) << check.dump();
  EXPECT_EQ(check["worst"], "actions[3] std");
  EXPECT_GT(check["max_rel_diff"].get<double>(), 0.5);
  ASSERT_GE(check["mismatches"].size(), 1u);
  EXPECT_NE(check["mismatches"][0].get<std::string>().find("actions[3] std:"), std::string::npos)
      << check.dump();
}

TEST_F(LerobotStatsImportTest, V21EpisodeStatsAgreeAndADoctoredOneIsAWarning) {
  json check = Import("v21");
  EXPECT_EQ(check["file"], "meta/episodes_stats.jsonl");
  EXPECT_EQ(check["compared"], json({"actions", "obs/state"}));
  EXPECT_TRUE(check["ok"]) << check.dump();
  EXPECT_LT(check["max_rel_diff"].get<double>(), 1e-6) << check.dump();

  check = Import("v21", "meta/episodes_stats.jsonl", "v21_episodes_stats_disagree.jsonl");
  EXPECT_FALSE(check["ok"]) << check.dump();
  EXPECT_EQ(check["worst"], "obs/state[0] max");
  EXPECT_EQ(check["mismatch_count"], 1) << check.dump();
}

}  // namespace
}  // namespace storage
