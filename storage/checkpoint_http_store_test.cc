// The HTTP backend against an in-memory twin of the server's blob routes: round trip, a failed
// or killed upload is never listed, uploads resume after failed chunks without duplicating
// bytes, damaged chunks and a whole-file checksum mismatch are refused, downloads resume with
// Range and are verified. (The real server's routes have their own pg tests.)
#include "storage/checkpoint_http_store.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "common/file_util.h"
#include "storage/testing/fake_blob_server.h"

namespace storage {
namespace {

class HttpStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = "/tmp/embody-ckpthttp-XXXXXX";
    dir_ = mkdtemp(tmpl.data());
    data_.resize(1 << 20);
    for (size_t i = 0; i < data_.size(); ++i) data_[i] = static_cast<char>(i * 7919 + i / 3);
    ASSERT_TRUE(common::WriteFileAtomic(dir_ + "/step-100.ckpt", data_).ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  HttpCheckpointStore Store(int max_retries = 5) {
    HttpCheckpointStoreOptions o;
    o.server_url = server_.url();
    o.token = [] { return std::string("t"); };
    o.chunk_bytes = 64 << 10;  // 16 chunks
    o.max_retries = max_retries;
    o.first_backoff = std::chrono::milliseconds(1);
    return HttpCheckpointStore(o);
  }
  std::unique_ptr<CheckpointSource> Source() {
    auto s = CheckpointSource::OpenInDir(dir_, "step-100.ckpt", kMaxCheckpointBytes);
    EXPECT_TRUE(s.ok());
    return std::move(*s);
  }

  testing::FakeBlobServer server_;
  std::string dir_;
  std::string data_;
};

TEST_F(HttpStoreTest, RoundTrip) {
  auto store = Store();
  auto src = Source();
  auto put = store.Put(3, 100, {{"loss", 0.25}}, *src);
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ(server_.puts, 16);
  auto list = store.List(3);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].id, put->id);
  EXPECT_EQ((*list)[0].step, 100);
  EXPECT_EQ((*list)[0].metrics["loss"], 0.25);
  auto got = store.Get(3, put->id, dir_ + "/down.ckpt");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*common::ReadFile(dir_ + "/down.ckpt"), data_);
  ASSERT_TRUE(store.Delete(3, put->id).ok());
  EXPECT_TRUE(store.List(3)->empty());
  EXPECT_EQ(store.Get(3, put->id, dir_ + "/gone").status().code(), common::Code::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/gone"));
}

TEST_F(HttpStoreTest, ResumesAfterFailedChunksWithoutDuplicatingBytes) {
  auto store = Store();
  auto src = Source();
  server_.fail_puts_before_append = 2;  // refused: the same chunk is sent again
  server_.fail_puts_after_append = 2;   // stored but the reply lost: the server's count wins
  auto put = store.Put(3, 100, {}, *src);
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ(server_.puts, 16 + 2);  // the two lost replies cost no resend
  ASSERT_TRUE(store.Get(3, put->id, dir_ + "/down.ckpt").ok());
  EXPECT_EQ(*common::ReadFile(dir_ + "/down.ckpt"), data_);
}

TEST_F(HttpStoreTest, AnUploadThatGivesUpIsNeverListed) {
  auto store = Store(/*max_retries=*/2);
  auto src = Source();
  server_.fail_puts_before_append = 100;  // the server stays unreachable: the upload is killed
  auto put = store.Put(3, 100, {}, *src);
  EXPECT_EQ(put.status().code(), common::Code::kUnavailable) << put.status().ToString();
  EXPECT_TRUE(store.List(3)->empty());
  // The client removed what it had started (a killed client could not: the server's pg tests
  // show such an upload stays unlisted until swept).
  EXPECT_TRUE(server_.Uploads().empty());
}

TEST_F(HttpStoreTest, ACorruptedFileFailsTheCommitAndIsDiscarded) {
  auto store = Store();
  auto src = Source();
  server_.corrupt_next_chunks = 1;  // the bytes change after their chunk checksum was checked
  auto put = store.Put(3, 100, {}, *src);
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(put.status().field(), "sha256") << put.status().ToString();
  EXPECT_TRUE(store.List(3)->empty());
  EXPECT_TRUE(server_.Uploads().empty());
}

TEST_F(HttpStoreTest, DownloadsResumeWithRangeAndAreVerified) {
  auto store = Store();
  auto src = Source();
  auto put = store.Put(3, 100, {}, *src);
  ASSERT_TRUE(put.ok());
  server_.cut_downloads = 3;
  auto got = store.Get(3, put->id, dir_ + "/down.ckpt");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*common::ReadFile(dir_ + "/down.ckpt"), data_);
  EXPECT_EQ(server_.cut_downloads, 0);
}

TEST_F(HttpStoreTest, UnreachableServerIsUnavailable) {
  HttpCheckpointStoreOptions o;
  o.server_url = "http://127.0.0.1:1";
  o.max_retries = 0;
  HttpCheckpointStore store(o);
  auto src = Source();
  EXPECT_EQ(store.Put(1, 1, {}, *src).status().code(), common::Code::kUnavailable);
  EXPECT_EQ(store.List(1).status().code(), common::Code::kUnavailable);
}

}  // namespace
}  // namespace storage
