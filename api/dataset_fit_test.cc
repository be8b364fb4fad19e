#include "api/dataset_fit.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace api {
namespace {

// A LeRobot humanoid's import: 26-value state and action, two cameras.
std::vector<DatasetKeyShape> Humanoid() {
  return {{"actions", "f32", {26}},
          {"obs/state", "f32", {26}},
          {"obs/head", "u8", {480, 640, 3}},
          {"obs/wrist", "u8", {240, 320, 3}}};
}

TEST(DatasetFitTest, WideStateTakesSeveralTokens) {
  auto fit = FitDataset(Humanoid(), DataOptions{}, 26, "dataset h1@1");
  ASSERT_TRUE(fit.ok()) << fit.status().ToString();
  EXPECT_EQ(fit->actions, 0u);
  EXPECT_EQ(fit->cameras, (std::vector<size_t>{2, 3}));
  EXPECT_EQ(fit->proprio, (std::vector<size_t>{1}));
  EXPECT_EQ(fit->state_width, 26);
  EXPECT_EQ(fit->state_tokens, 2);

  std::vector<DatasetKeyShape> narrow = {{"actions", "f64", {7}}, {"obs/q", "f32", {16}}};
  auto one = FitDataset(narrow, DataOptions{}, 7, "d");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->state_tokens, 1);
  EXPECT_TRUE(one->cameras.empty());
  std::vector<DatasetKeyShape> stateless = {{"actions", "f32", {7}}};
  EXPECT_EQ(FitDataset(stateless, DataOptions{}, 7, "d")->state_tokens, 1);
}

TEST(DatasetFitTest, MismatchNamesBothSidesAndTheField) {
  auto a = FitDataset(Humanoid(), DataOptions{}, 7, "dataset h1@1");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().field(), "engine.model.action_dim");
  EXPECT_EQ(a.status().message(),
            "dataset h1@1: the dataset's actions have 26 dimensions but engine.model.action_dim "
            "is 7; set it to 26");

  DataOptions cams;
  cams.cameras = {"obs/left"};
  auto c = FitDataset(Humanoid(), cams, 26, "d");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().field(), "engine.data.cameras");
  EXPECT_NE(c.status().message().find("image keys: obs/head, obs/wrist"), std::string::npos);

  DataOptions prop;
  prop.proprio = {"obs/head"};  // an image is not state
  EXPECT_EQ(FitDataset(Humanoid(), prop, 26, "d").status().field(), "engine.data.proprio");

  std::vector<DatasetKeyShape> huge = {{"actions", "f32", {7}}, {"obs/q", "f32", {65}}};
  auto h = FitDataset(huge, DataOptions{}, 7, "d");
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().field(), "engine.data.proprio");
  EXPECT_NE(h.status().message().find("65 values, more than the 64"), std::string::npos)
      << h.status().message();
  std::vector<DatasetKeyShape> just_fits = {{"actions", "f32", {7}}, {"obs/q", "f32", {64}}};
  EXPECT_EQ(FitDataset(just_fits, DataOptions{}, 7, "d")->state_tokens, 4);

  std::vector<DatasetKeyShape> two_channel = {{"actions", "f32", {7}},
                                              {"obs/depth", "u8", {8, 8, 2}}};
  EXPECT_EQ(FitDataset(two_channel, DataOptions{}, 7, "d").status().field(),
            "engine.data.cameras");
  std::vector<DatasetKeyShape> no_actions = {{"obs/q", "f32", {7}}};
  EXPECT_FALSE(FitDataset(no_actions, DataOptions{}, 7, "d").ok());
  std::vector<DatasetKeyShape> image_actions = {{"actions", "u8", {7}}};
  EXPECT_FALSE(FitDataset(image_actions, DataOptions{}, 7, "d").ok());
}

TEST(DatasetFitTest, DefaultStateFollowsKnownLayouts) {
  std::vector<DatasetKeyShape> robomimic = {{"actions", "f32", {7}},
                                            {"obs/object", "f32", {10}},
                                            {"obs/robot0_eef_pos", "f32", {3}},
                                            {"obs/robot0_eef_quat", "f32", {4}},
                                            {"obs/robot0_gripper_qpos", "f32", {2}}};
  auto fit = FitDataset(robomimic, DataOptions{}, 7, "d");
  ASSERT_TRUE(fit.ok());
  EXPECT_EQ(fit->proprio, (std::vector<size_t>{2, 3, 4}));
  EXPECT_EQ(fit->state_width, 9);
}

TEST(DatasetFitTest, KeysFromAManifest) {
  auto keys = DatasetKeysOf(nlohmann::json::parse(
      R"({"keys": [{"name": "actions", "dtype": "f32", "shape": [26]},
                   {"name": "obs/head", "dtype": "u8", "shape": [48, 64, 3]}]})"));
  ASSERT_TRUE(keys.ok());
  ASSERT_EQ(keys->size(), 2u);
  EXPECT_EQ((*keys)[1].shape, (std::vector<int64_t>{48, 64, 3}));
  EXPECT_TRUE(IsImageKey((*keys)[1]));
  EXPECT_FALSE(DatasetKeysOf(nlohmann::json::object()).ok());
  EXPECT_FALSE(DatasetKeysOf(nlohmann::json::parse(R"({"keys": [{"name": 3}]})")).ok());
  EXPECT_FALSE(
      DatasetKeysOf(nlohmann::json::parse(R"({"keys": [{"name": "a", "dtype": "f32",
                                                       "shape": [-1]}]})"))
          .ok());
}

}  // namespace
}  // namespace api
