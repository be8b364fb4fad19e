// BlobFiles on a fresh directory: chunks written at an offset drop what lay past it, digests
// count only the bytes asked for, a commit moves the part into place (an empty blob has none),
// readers keep reading a removed file, and listing finds stems by suffix. Then the two layouts
// on top of it: checkpoints (part, then committed) and dataset uploads (read where written).
#include "controlplane/service/blob_files.h"

#include <sys/stat.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "common/crypto.h"
#include "common/testing/temp_dir.h"
#include "controlplane/service/checkpoint_files.h"
#include "controlplane/service/dataset_upload_files.h"

namespace controlplane::service {
namespace {

class BlobFilesTest : public ::testing::Test {
 protected:
  common::testing::TempDir temp_{"embody-blobs"};
  const std::string dir_ = temp_.path();
};

TEST_F(BlobFilesTest, ChunksAtAnOffsetDropWhatLayPastIt) {
  BlobFiles blobs(dir_ + "/root");
  ASSERT_TRUE(blobs.WriteAt("a/b/1.part", 0, "hello world").ok());  // directories made
  ASSERT_TRUE(blobs.WriteAt("a/b/1.part", 5, "!!").ok());           // a retry from byte 5
  auto d = blobs.DigestOf("a/b/1.part");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->bytes, 7);
  EXPECT_EQ(d->sha256, common::Sha256Hex("hello!!"));
  EXPECT_EQ(blobs.DigestOf("a/b/1.part", 5)->sha256, common::Sha256Hex("hello"));
  EXPECT_EQ(blobs.DigestOf("missing")->bytes, 0);
  struct stat st {};
  ASSERT_EQ(::stat(blobs.PathOf("a/b/1.part").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(BlobFilesTest, CommitMovesThePartAndAnEmptyBlobNeedsNone) {
  BlobFiles blobs(dir_);
  ASSERT_TRUE(blobs.WriteAt("j/1.part", 0, "bytes").ok());
  ASSERT_TRUE(blobs.Commit("j/1.part", "j/1.ckpt", 5).ok());
  EXPECT_FALSE(std::filesystem::exists(blobs.PathOf("j/1.part")));
  EXPECT_EQ(blobs.DigestOf("j/1.ckpt")->bytes, 5);
  ASSERT_TRUE(blobs.Commit("k/2.part", "k/2.ckpt", 0).ok());
  EXPECT_EQ(blobs.Open("k/2.ckpt").value()->size(), 0);
  EXPECT_FALSE(blobs.Commit("k/3.part", "k/3.ckpt", 4).ok());  // bytes promised, none held
}

TEST_F(BlobFilesTest, AReaderOutlivesRemovalAndReadsRanges) {
  BlobFiles blobs(dir_);
  ASSERT_TRUE(blobs.WriteAt("7.hdf5", 0, "0123456789").ok());
  auto r = blobs.Open("7.hdf5", 8);
  ASSERT_TRUE(r.ok());
  blobs.Remove("7.hdf5");
  blobs.Remove("7.hdf5");  // missing already: fine
  EXPECT_EQ((*r)->size(), 8);
  EXPECT_EQ(*(*r)->Read(2, 3), "234");
  EXPECT_EQ(*(*r)->Read(6, 100), "67");  // stops at the limit
  EXPECT_EQ(*(*r)->Read(8, 1), "");
  EXPECT_EQ(blobs.Open("7.hdf5").status().code(), common::Code::kNotFound);
}

TEST_F(BlobFilesTest, ListFindsStemsBySuffix) {
  BlobFiles blobs(dir_);
  EXPECT_TRUE(blobs.List("", ".hdf5").empty());
  ASSERT_TRUE(blobs.WriteAt("3.hdf5", 0, "x").ok());
  ASSERT_TRUE(blobs.WriteAt("12.hdf5", 0, "x").ok());
  ASSERT_TRUE(blobs.WriteAt("notes.txt", 0, "x").ok());
  EXPECT_EQ(blobs.List("", ".hdf5"), (std::vector<std::string>{"12", "3"}));
}

TEST_F(BlobFilesTest, CheckpointAndUploadLayouts) {
  CheckpointFiles checkpoints(dir_);
  CheckpointBlob c;
  c.id = 4;
  c.job_id = 2;
  c.tenant_id = 1;
  c.bytes = 3;
  ASSERT_TRUE(checkpoints.AppendChunk(c, 0, "abc").ok());
  EXPECT_EQ(checkpoints.Open(c).status().code(), common::Code::kNotFound);  // not committed
  ASSERT_TRUE(checkpoints.Publish(c).ok());
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/checkpoints/tenant-1/job-2/4.ckpt"));
  EXPECT_EQ(*checkpoints.Open(c).value()->Read(0, 10), "abc");
  c.bytes = 4;
  EXPECT_EQ(checkpoints.Open(c).status().code(), common::Code::kInternal);  // not the row's size
  checkpoints.Remove(c);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/checkpoints/tenant-1/job-2/4.ckpt"));

  DatasetUploadFiles uploads(dir_);
  ASSERT_TRUE(uploads.Write(9, 0, "abcdef").ok());
  EXPECT_EQ(uploads.PathOf(9), dir_ + "/dataset-uploads/9.hdf5");
  EXPECT_EQ(*uploads.Read(9, 4, 10), "ef");
  EXPECT_EQ(uploads.Open(9, 4).value()->size(), 4);
  EXPECT_EQ(uploads.Open(9, 7).status().code(), common::Code::kNotFound);  // incomplete
  EXPECT_EQ(uploads.List(), std::vector<int64_t>{9});
  uploads.Remove(9);
  EXPECT_TRUE(uploads.List().empty());
}

}  // namespace
}  // namespace controlplane::service
