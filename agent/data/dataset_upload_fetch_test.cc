// Fetching an import's upload from a local HTTP server standing in for embody-server: the bytes
// arrive whole and verified, an interrupted download resumes with Range, and a damaged copy, a
// refusal or a path that exists already leave nothing behind. The spec helpers find the upload
// and rewrite the source to the local copy.
#include "agent/data/dataset_upload_fetch.h"

#include <sys/stat.h>
#include <unistd.h>

#include <httplib.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "common/crypto.h"
#include "common/file_util.h"

namespace agent {
namespace {

using nlohmann::json;


class UploadFetchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = "/tmp/embody-upload-fetch-XXXXXX";
    dir_ = mkdtemp(tmpl.data());
    for (int i = 0; i < 300000; ++i) content_.push_back(static_cast<char>('a' + (i * 7) % 26));
    served_ = content_;
    server_.Get("/v1/datasets/7/upload", [this](const httplib::Request& req,
                                                httplib::Response& res) {
      auth_ = req.get_header_value("Authorization");
      ++requests_;
      const bool cut = cut_once_.exchange(false);
      res.set_content_provider(
          served_.size(), "application/octet-stream",
          [this, cut](size_t offset, size_t length, httplib::DataSink& sink) {
            size_t n = std::min<size_t>(length, 64 * 1024);
            // An interrupted answer: part of the bytes, then the connection drops.
            if (cut && offset >= 100000) return false;
            sink.write(served_.data() + offset, n);
            return true;
          });
      if (!req.ranges.empty()) res.status = 206;
    });
    server_.Get("/v1/datasets/8/upload", [](const httplib::Request&, httplib::Response& res) {
      res.status = 404;
      res.set_content(R"({"error":{"code":"not_found","message":"dataset 8 not found"}})",
                      "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    options_.server_url = "http://127.0.0.1:" + std::to_string(port_);
    options_.token = [] { return std::string("node-credential"); };
    options_.first_backoff = std::chrono::milliseconds(1);
  }
  void TearDown() override {
    server_.stop();
    thread_.join();
    std::filesystem::remove_all(dir_);
  }
  UploadRef Ref(int64_t id = 7) {
    return UploadRef{id, static_cast<int64_t>(content_.size()), common::Sha256Hex(content_)};
  }

  std::string dir_;
  std::string content_, served_;
  std::string auth_;
  std::atomic<int> requests_{0};
  std::atomic<bool> cut_once_{false};
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  UploadFetchOptions options_;
};

TEST_F(UploadFetchTest, FetchesTheWholeFileVerifiedWithTheNodeCredential) {
  const std::string path = dir_ + "/upload.hdf5";
  ASSERT_TRUE(FetchUpload(options_, Ref(), path).ok());
  EXPECT_EQ(common::ReadFile(path).value(), content_);
  EXPECT_EQ(auth_, "Bearer node-credential");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // A file already there is never written over (nor followed, were it a link).
  EXPECT_FALSE(FetchUpload(options_, Ref(), path).ok());
  EXPECT_EQ(common::ReadFile(path).value(), content_);
}

TEST_F(UploadFetchTest, AnInterruptedDownloadResumesWhereItStopped) {
  cut_once_ = true;
  const std::string path = dir_ + "/upload.hdf5";
  common::Status st = FetchUpload(options_, Ref(), path);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(common::ReadFile(path).value(), content_);
  EXPECT_GE(requests_.load(), 2);
}

TEST_F(UploadFetchTest, DamagedRefusedOrMalformedLeavesNothing) {
  served_[1234] ^= 1;
  const std::string path = dir_ + "/upload.hdf5";
  common::Status damaged = FetchUpload(options_, Ref(), path);
  EXPECT_EQ(damaged.code(), common::Code::kFailedPrecondition);
  EXPECT_FALSE(std::filesystem::exists(path));

  common::Status refused = FetchUpload(options_, Ref(8), path);
  EXPECT_EQ(refused.code(), common::Code::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(path));

  UploadRef bad = Ref();
  bad.sha256 = "../../etc/passwd";
  EXPECT_EQ(FetchUpload(options_, bad, path).code(), common::Code::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST_F(UploadFetchTest, HandsTheCopyToTheJobReadOnly) {
  const std::string fetched = dir_ + "/fetched.hdf5", job_path = dir_ + "/job-copy.hdf5";
  ASSERT_TRUE(common::WriteFileAtomic(fetched, "bytes", 0600).ok());
  ASSERT_TRUE(HandUploadToJob(fetched, job_path, std::nullopt).ok());
  EXPECT_FALSE(std::filesystem::exists(fetched));
  struct stat st {};
  ASSERT_EQ(::stat(job_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0400u);
}

TEST(UploadSpecTest, FindsTheUploadAndRewritesTheSourceToTheCopy) {
  json spec = {{"kind", "import"},
               {"import",
                {{"dataset_id", 9},
                 {"source",
                  {{"format", "hdf5"},
                   {"upload", {{"bytes", 5}, {"sha256", std::string(64, 'b')}}},
                   {"filter", "train"}}}}}};
  auto ref = UploadOf(spec);
  ASSERT_TRUE(ref);
  EXPECT_EQ(ref->dataset_id, 9);
  EXPECT_EQ(ref->bytes, 5);
  json local = SpecReadingCopy(spec, "/data/jobs/job-3/upload.hdf5");
  EXPECT_FALSE(UploadOf(local));
  EXPECT_EQ(local["import"]["source"],
            (json{{"format", "hdf5"}, {"path", "/data/jobs/job-3/upload.hdf5"}, {"filter", "train"}}));
  json path_import = spec;
  path_import["import"]["source"] = {{"path", "/d/x.hdf5"}};
  EXPECT_FALSE(UploadOf(path_import));
  EXPECT_FALSE(UploadOf(json{{"kind", "train"}}));
  // The node's copy is named for what it holds: a LeRobot upload is a tar of the directory.
  EXPECT_EQ(UploadFileName(spec), "upload.hdf5");
  spec["import"]["source"]["format"] = "lerobot";
  EXPECT_EQ(UploadFileName(spec), "upload.tar");
  spec["import"]["source"]["format"] = "oci";  // an OCI image layout tar
  EXPECT_EQ(UploadFileName(spec), "upload.tar");
  EXPECT_EQ(UploadFileName(json{{"kind", "import"}}), "upload.hdf5");
}

}  // namespace
}  // namespace agent
