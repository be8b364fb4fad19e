// CheckpointSource refuses what a hostile job can plant instead of a checkpoint.
#include "storage/checkpoint_source.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "common/file_util.h"

namespace storage {
namespace {

class CheckpointSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = "/tmp/embody-ckptsrc-XXXXXX";
    dir_ = mkdtemp(tmpl.data());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(CheckpointSourceTest, ReadsARegularFileAndItsDigest) {
  ASSERT_TRUE(common::WriteFileAtomic(dir_ + "/step-1.ckpt", "abc").ok());
  auto src = CheckpointSource::OpenInDir(dir_, "step-1.ckpt", 100);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EXPECT_EQ((*src)->size(), 3);
  EXPECT_EQ(*(*src)->ReadAt(1, 10), "bc");
  EXPECT_EQ(*(*src)->Sha256Hex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_F(CheckpointSourceTest, RefusesLinksFifosDirectoriesPathsAndOversizeFiles) {
  ASSERT_TRUE(common::WriteFileAtomic(dir_ + "/secret", "root only").ok());
  ASSERT_EQ(::symlink((dir_ + "/secret").c_str(), (dir_ + "/step-2.ckpt").c_str()), 0);
  EXPECT_FALSE(CheckpointSource::OpenInDir(dir_, "step-2.ckpt", 100).ok());
  ASSERT_EQ(::mkfifo((dir_ + "/step-3.ckpt").c_str(), 0600), 0);
  auto fifo = CheckpointSource::OpenInDir(dir_, "step-3.ckpt", 100);  // must not block
  EXPECT_FALSE(fifo.ok());
  ASSERT_EQ(::mkdir((dir_ + "/step-4.ckpt").c_str(), 0700), 0);
  EXPECT_FALSE(CheckpointSource::OpenInDir(dir_, "step-4.ckpt", 100).ok());
  EXPECT_FALSE(CheckpointSource::OpenInDir(dir_, "../secret", 100).ok());
  EXPECT_FALSE(CheckpointSource::OpenInDir(dir_, "..", 100).ok());
  ASSERT_TRUE(common::WriteFileAtomic(dir_ + "/big", std::string(101, 'x')).ok());
  auto big = CheckpointSource::OpenInDir(dir_, "big", 100);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), common::Code::kResourceExhausted);
  // A directory swapped for a link to elsewhere is not followed either.
  ASSERT_EQ(::mkdir((dir_ + "/real").c_str(), 0700), 0);
  ASSERT_TRUE(common::WriteFileAtomic(dir_ + "/real/step-5.ckpt", "x").ok());
  ASSERT_EQ(::symlink((dir_ + "/real").c_str(), (dir_ + "/link").c_str()), 0);
  EXPECT_FALSE(CheckpointSource::OpenInDir(dir_ + "/link", "step-5.ckpt", 100).ok());
  EXPECT_TRUE(CheckpointSource::OpenInDir(dir_ + "/real", "step-5.ckpt", 100).ok());
}

TEST_F(CheckpointSourceTest, SizeIsFixedAtOpen) {
  ASSERT_TRUE(common::WriteFileAtomic(dir_ + "/f", "1234").ok());
  auto src = CheckpointSource::Open(dir_ + "/f", 100);
  ASSERT_TRUE(src.ok());
  FILE* f = std::fopen((dir_ + "/f").c_str(), "a");
  std::fputs("more bytes", f);
  std::fclose(f);
  EXPECT_EQ((*src)->size(), 4);
  EXPECT_EQ(*(*src)->ReadAt(0, 100), "1234");
}

}  // namespace
}  // namespace storage
