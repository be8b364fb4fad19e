// A LeRobot dataset sent as a tar (what an upload of a directory becomes): archives written by
// GNU tar, with the dataset at the top and in one top-level directory, import like the directory
// and leave no unpacked copy; a hostile archive or one without a dataset fails with nothing left.
#include "storage/lerobot_archive.h"

#include <cstdlib>
#include <filesystem>
#include <set>

#include <gtest/gtest.h>

#include "storage/dataset_reader.h"
#include "storage/testing/lerobot_fixture.h"
#include "storage/testing/robomimic_file.h"

namespace storage {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class LerobotArchiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("command -v tar >/dev/null 2>&1") != 0) {
      GTEST_SKIP() << "GNU tar is not installed (Debian package tar)";
    }
    auto f = testing::FindLerobotFixtures(EMBODY_LEROBOT_FIXTURES);
    if (!f.ok()) GTEST_SKIP() << f.status().message();
    fixtures_ = *f;
    root_ = testing::MakeTempDir("lerobot_archive_test");
  }
  void TearDown() override {
    if (!root_.empty()) fs::remove_all(root_);
  }

  // Only these names are left in root_.
  void ExpectOnly(std::set<std::string> names) {
    std::set<std::string> left;
    for (const auto& e : fs::directory_iterator(root_)) left.insert(e.path().filename().string());
    EXPECT_EQ(left, names);
  }

  testing::LerobotFixtures fixtures_;
  std::string root_;
};

TEST_F(LerobotArchiveTest, ImportsWhatGnuTarWritesAndRemovesTheUnpackedCopy) {
  ASSERT_TRUE(testing::MakeLerobotDataset(fixtures_, "v30", root_ + "/pusht").ok());
  // The dataset in one top-level directory, then at the archive's top.
  const std::pair<std::string, std::string> archives[] = {
      {root_ + "/nested.tar", "-C " + root_ + " pusht"},
      {root_ + "/flat.tar", "--format=pax -C " + root_ + "/pusht ."}};
  for (const auto& [archive, args] : archives) {
    SCOPED_TRACE(archive);
    ASSERT_EQ(std::system(("tar -cf " + archive + " " + args).c_str()), 0);
    const std::string out = archive + ".out";
    auto r = ImportLerobotArchive(archive, out, root_ + "/unpack", {});
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->episodes, fixtures_.expected["episodes"].size());
    const json& source = r->manifest.source;
    EXPECT_EQ(source["path"], archive);
    EXPECT_EQ(source["archive"], "tar");
    EXPECT_EQ(source["codebase_version"], "v3.0");
    EXPECT_TRUE(source["stats_check"]["ok"]) << source.dump();
    EXPECT_FALSE(fs::exists(root_ + "/unpack")) << "the unpacked copy is removed";
    auto ds = Dataset::Open(out);
    ASSERT_TRUE(ds.ok()) << ds.status().message();
    EXPECT_TRUE((*ds)->Verify().ok());
  }
}

TEST_F(LerobotArchiveTest, AHostileArchiveOrOneWithoutADatasetLeavesNothing) {
  ASSERT_TRUE(testing::MakeLerobotDataset(fixtures_, "v21", root_ + "/pusht").ok());
  fs::create_symlink("/etc", root_ + "/pusht/meta/escape");
  ASSERT_EQ(std::system(("tar -cf " + root_ + "/link.tar -C " + root_ + "/pusht .").c_str()), 0);
  fs::remove_all(root_ + "/pusht");
  auto r = ImportLerobotArchive(root_ + "/link.tar", root_ + "/out", root_ + "/unpack", {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(root_ + "/link.tar: member #"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("'./meta/escape': a symbolic link"), std::string::npos)
      << r.status().message();
  ExpectOnly({"link.tar"});

  fs::create_directories(root_ + "/other/docs");
  ASSERT_EQ(std::system(("touch " + root_ + "/other/docs/readme.txt && tar -cf " + root_ +
                         "/other.tar -C " + root_ + "/other .")
                            .c_str()),
            0);
  fs::remove_all(root_ + "/other");
  r = ImportLerobotArchive(root_ + "/other.tar", root_ + "/out", root_ + "/unpack", {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no LeRobot dataset in it (1 files"), std::string::npos)
      << r.status().message();
  ExpectOnly({"link.tar", "other.tar"});
}

}  // namespace
}  // namespace storage
