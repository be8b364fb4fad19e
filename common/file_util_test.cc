#include "common/file_util.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace common {
namespace {

TEST(FileUtilTest, AtomicWriteThenRead) {
  auto dir = std::filesystem::temp_directory_path() / ("embody_fu_" + std::to_string(::getpid()));
  ASSERT_TRUE(MakeDirs((dir / "a/b").string()).ok());
  std::string path = (dir / "a/b/f.txt").string();
  ASSERT_TRUE(WriteFileAtomic(path, "one").ok());
  ASSERT_TRUE(WriteFileAtomic(path, "two").ok());
  auto r = ReadFile(path);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "two");
  // No temp files are left behind.
  int n = 0;
  for (auto& e : std::filesystem::directory_iterator(dir / "a/b")) (void)e, ++n;
  EXPECT_EQ(n, 1);
  EXPECT_FALSE(ReadFile((dir / "missing").string()).ok());
  EXPECT_FALSE(WriteFileAtomic((dir / "nodir/x").string(), "x").ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace common
