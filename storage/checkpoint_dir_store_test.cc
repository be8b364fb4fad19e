// The directory backend: round trip, atomicity (a torn write is never listed), replacement,
// checksum verification on Get.
#include "storage/checkpoint_dir_store.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "common/file_util.h"
#include "common/env.h"

namespace storage {
namespace {

class DirStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = "/tmp/embody-ckptdir-XXXXXX";
    dir_ = mkdtemp(tmpl.data());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::unique_ptr<CheckpointSource> Source(const std::string& name, const std::string& data) {
    EXPECT_TRUE(common::WriteFileAtomic(dir_ + "/" + name, data).ok());
    auto s = CheckpointSource::OpenInDir(dir_, name, kMaxCheckpointBytes);
    EXPECT_TRUE(s.ok());
    return std::move(*s);
  }
  std::string dir_;
};

TEST_F(DirStoreTest, RoundTrip) {
  DirCheckpointStore store(dir_ + "/store");
  std::string data(3 << 20, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131 + 7);
  auto src = Source("a", data);
  auto put = store.Put(7, 100, {{"loss", 0.5}}, *src);
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ(put->bytes, static_cast<int64_t>(data.size()));
  auto list = store.List(7);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].step, 100);
  EXPECT_EQ((*list)[0].metrics["loss"], 0.5);
  EXPECT_EQ((*list)[0].sha256, put->sha256);
  auto got = store.Get(7, 100, dir_ + "/out.ckpt");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*common::ReadFile(dir_ + "/out.ckpt"), data);
  EXPECT_TRUE(store.List(8)->empty());
  ASSERT_TRUE(store.Delete(7, 100).ok());
  EXPECT_TRUE(store.List(7)->empty());
  EXPECT_EQ(store.Get(7, 100, dir_ + "/x").status().code(), common::Code::kNotFound);
}

TEST_F(DirStoreTest, TornWritesAreNeverListed) {
  DirCheckpointStore store(dir_ + "/store");
  auto src = Source("a", "0123456789");
  ASSERT_TRUE(store.Put(1, 10, {}, *src).ok());
  // A writer killed mid-copy leaves a temp file; one killed between data and metadata leaves a
  // data file without metadata; a data file cut short disagrees with its metadata.
  {
    auto w = common::Env::Default()->NewAtomicFile(store.JobDir(1) + "/step-20.ckpt", {});
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Append("half").ok());
    // Not committed; the temp file is what a killed process would leave (minus this cleanup).
    std::filesystem::copy_file(store.JobDir(1) + "/step-10.ckpt", store.JobDir(1) + "/.tmp-x");
  }
  ASSERT_TRUE(common::WriteFileAtomic(store.JobDir(1) + "/step-30.ckpt", "no meta").ok());
  ASSERT_TRUE(common::WriteFileAtomic(store.JobDir(1) + "/step-40.ckpt", "short").ok());
  ASSERT_TRUE(common::WriteFileAtomic(store.JobDir(1) + "/step-40.json",
                                      R"({"step":40,"bytes":99,"sha256":""})")
                  .ok());
  auto list = store.List(1);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].step, 10);
}

TEST_F(DirStoreTest, CorruptDataFailsGetAndLeavesNothing) {
  DirCheckpointStore store(dir_ + "/store");
  auto src = Source("a", "0123456789");
  ASSERT_TRUE(store.Put(1, 10, {}, *src).ok());
  ASSERT_TRUE(common::WriteFileAtomic(store.JobDir(1) + "/step-10.ckpt", "0123456780").ok());
  auto got = store.Get(1, 10, dir_ + "/out");
  EXPECT_EQ(got.status().code(), common::Code::kFailedPrecondition);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/out"));
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    EXPECT_EQ(e.path().filename().string().rfind(".tmp-", 0), std::string::npos) << e.path();
  }
}

TEST_F(DirStoreTest, PutReplacesTheSameStep) {
  DirCheckpointStore store(dir_ + "/store");
  auto a = Source("a", "first");
  auto b = Source("b", "second!");
  ASSERT_TRUE(store.Put(1, 5, {}, *a).ok());
  ASSERT_TRUE(store.Put(1, 5, {{"loss", 1}}, *b).ok());
  auto list = store.List(1);
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].bytes, 7);
  ASSERT_TRUE(store.Get(1, 5, dir_ + "/o").ok());
  EXPECT_EQ(*common::ReadFile(dir_ + "/o"), "second!");
}

}  // namespace
}  // namespace storage
