#include "api/dataset_ref.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace api {
namespace {

TEST(DatasetRefTest, BuiltInAndDirectory) {
  auto sim = ParseDatasetRef("sim:reach");
  ASSERT_TRUE(sim.ok());
  EXPECT_FALSE(sim->is_directory());

  auto dir = ParseDatasetRef("dir:/data/lift/");
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  EXPECT_TRUE(dir->is_directory());
  EXPECT_EQ(dir->path, "/data/lift");                      // trailing slash dropped
  auto dotted = ParseDatasetRef("dir:/data/v1.2/..lift");  // dots inside names are fine
  ASSERT_TRUE(dotted.ok());
  EXPECT_EQ(dotted->path, "/data/v1.2/..lift");
}

TEST(DatasetRefTest, RefusesWhatIsNotAPlainAbsoluteDirectory) {
  for (const std::string& bad : std::vector<std::string>{
           "", "sim:other", "s3://bucket/x", "dataset:lift", "dir:", "dir:relative/path",
           "dir:/a/../b", "dir:/a/./b", "dir:/..", "dir:/a/..", std::string("dir:/a\nb"),
           std::string("dir:/a\0b", 8), "dir:/" + std::string(kMaxDatasetPathBytes, 'x')}) {
    auto r = ParseDatasetRef(bad);
    EXPECT_FALSE(r.ok()) << "accepted: " << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), common::Code::kInvalidArgument);
      EXPECT_EQ(r.status().field(), "engine.data.dataset");
    }
  }
}

}  // namespace
}  // namespace api
