// BlobClient against a local server holding one blob: chunked uploads resume after refused and
// lost chunks without sending bytes twice, a damaged chunk is sent again, a refusal ends the
// upload; downloads resume with Range and are verified; a bare 404 (no error body, as a proxy or
// a missing route answers) is not_found, and a server that ignores the Range is refused.
#include "common/http/blob_client.h"

#include <atomic>
#include <mutex>

#include <gtest/gtest.h>

#include "common/crypto.h"
#include "common/http/status_http.h"
#include "common/testing/local_http_server.h"

namespace common::http {
namespace {

// PUT /blob?offset=N appends a chunk at exactly the bytes held; GET /blob serves them by Range.
class BlobServer {
 public:
  BlobServer() {
    http_.server().Put("/blob", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mu_);
      ++puts;
      auth.push_back(req.get_header_value("Authorization"));
      if (refuse_puts) return Error(res, 403, Status(Code::kPermissionDenied, "not yours"));
      if (fail_before_append > 0 && fail_before_append--) return Error(res, 503, Unavailable("x"));
      const int64_t offset = std::stoll(req.get_param_value("offset"));
      if (offset != static_cast<int64_t>(held.size())) {
        return Error(res, 409,
                     Status(Code::kFailedPrecondition, "offset is not the end", "offset"));
      }
      std::string body = req.body;
      if (damage_next > 0 && damage_next--) body[0] ^= 1;
      if (Sha256Hex(body) != req.get_header_value("X-Content-Sha256")) {
        return Error(res, 400, Status(Code::kInvalidArgument, "chunk damaged", "X-Content-Sha256"));
      }
      held += body;
      if (lose_reply_after_append > 0 && lose_reply_after_append--) {
        return Error(res, 503, Unavailable("reply lost"));
      }
      res.set_content("{\"received_bytes\":" + std::to_string(held.size()) + "}",
                      "application/json");
    });
    http_.server().Get("/blob", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mu_);
      ++gets;
      const bool cut = cut_downloads > 0 && cut_downloads--;
      const std::string served = held;
      if (ignore_range) {  // the whole blob from byte 0, with a 200, whatever was asked
        res.status = 200;
        res.set_chunked_content_provider(
            "application/octet-stream", [served, cut](size_t offset, httplib::DataSink& sink) {
              if (cut && offset > 0) return false;
              if (offset < served.size()) {
                sink.write(served.data() + offset, std::min<size_t>(served.size() - offset, 4096));
              } else {
                sink.done();
              }
              return true;
            });
        return;
      }
      res.set_content_provider(
          served.size(), "application/octet-stream",
          [served, cut](size_t offset, size_t length, httplib::DataSink& sink) {
            if (cut && offset > 0) return false;  // drops the connection
            sink.write(served.data() + offset, std::min<size_t>(length, 4096));
            return true;
          });
      if (!req.ranges.empty()) res.status = 206;
    });
    // No error body: what a proxy, or a route that does not exist, answers.
    http_.server().Get("/gone",
                       [](const httplib::Request&, httplib::Response& res) { res.status = 404; });
    http_.Start();
  }
  std::string url() const { return http_.url(); }
  int64_t Held() {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int64_t>(held.size());
  }

  std::string held;
  int puts = 0, gets = 0;
  int fail_before_append = 0, lose_reply_after_append = 0, damage_next = 0, cut_downloads = 0;
  bool refuse_puts = false, ignore_range = false;
  std::vector<std::string> auth;

 private:
  static void Error(httplib::Response& res, int status, const Status& st) {
    res.status = status;
    res.set_content(ErrorBodyText(st), "application/json");
  }
  std::mutex mu_;
  testing::LocalHttpServer http_;  // last: stopped before the state its routes use goes
};

class BlobClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 100000; ++i) data_.push_back(static_cast<char>(i * 7919 + i / 5));
    ClientOptions o;
    o.base_url = server_.url();
    o.bearer_token_source = [this] { return "t" + std::to_string(++tokens_); };
    client_ = std::move(*Client::Create(o));
    BlobOptions b;
    b.chunk_bytes = 10000;  // 10 chunks
    b.first_backoff = std::chrono::milliseconds(1);
    blob_ = std::make_unique<BlobClient>(*client_, b);
  }
  Status Upload(std::vector<int64_t>* progress = nullptr) {
    return blob_->Upload(
        "/blob", static_cast<int64_t>(data_.size()), 0,
        [this](int64_t off, size_t n) { return Result<std::string>(data_.substr(off, n)); },
        [this] { return Result<int64_t>(server_.Held()); },
        [progress](int64_t off) {
          if (progress) progress->push_back(off);
        });
  }
  Status Download(const std::string& path, std::string* out, const std::string& sha) {
    return blob_->Download(path, static_cast<int64_t>(data_.size()), sha, "blob 1",
                           [out](const char* d, size_t n) {
                             out->append(d, n);
                             return Status::Ok();
                           });
  }

  BlobServer server_;
  std::string data_;
  int tokens_ = 0;
  std::unique_ptr<Client> client_;
  std::unique_ptr<BlobClient> blob_;
};

TEST_F(BlobClientTest, UploadsInChunksWithAFreshTokenEachCall) {
  std::vector<int64_t> progress;
  ASSERT_TRUE(Upload(&progress).ok());
  EXPECT_EQ(server_.held, data_);
  EXPECT_EQ(server_.puts, 10);
  ASSERT_EQ(progress.size(), 10u);
  EXPECT_EQ(progress.back(), static_cast<int64_t>(data_.size()));
  EXPECT_EQ(server_.auth.front(), "Bearer t1");
  EXPECT_EQ(server_.auth.back(), "Bearer t10");
}

TEST_F(BlobClientTest, UploadsResumeFromWhatTheServerHoldsWithoutSendingBytesTwice) {
  server_.fail_before_append = 2;       // the same chunk again
  server_.lose_reply_after_append = 2;  // stored, the answer lost: the server's count wins
  server_.damage_next = 1;              // damaged on the way: refused, sent again
  ASSERT_TRUE(Upload().ok());
  EXPECT_EQ(server_.held, data_);
  EXPECT_EQ(server_.puts, 10 + 2 + 1 + 0);  // lost answers cost no resend
}

TEST_F(BlobClientTest, ARefusalEndsTheUploadAsItIs) {
  server_.refuse_puts = true;
  Status st = Upload();
  EXPECT_EQ(st.code(), Code::kPermissionDenied) << st.ToString();
  EXPECT_EQ(st.message(), "not yours");
  EXPECT_EQ(server_.puts, 1);
}

TEST_F(BlobClientTest, AServerThatStaysAwayEndsTheUploadAsUnavailable) {
  server_.fail_before_append = 100;
  EXPECT_EQ(Upload().code(), Code::kUnavailable);
  EXPECT_EQ(server_.puts, 1 + 5);
}

TEST_F(BlobClientTest, DownloadsResumeWithRangeAndAreVerified) {
  server_.held = data_;
  server_.cut_downloads = 3;
  std::string got;
  Status st = Download("/blob", &got, Sha256Hex(data_));
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(got, data_);
  EXPECT_EQ(server_.gets, 4);
  std::string again;
  EXPECT_EQ(Download("/blob", &again, Sha256Hex("other")).code(), Code::kFailedPrecondition);
}

TEST_F(BlobClientTest, ABare404IsNotFoundNeverInternal) {
  std::string got;
  Status st = Download("/gone", &got, Sha256Hex(data_));
  EXPECT_EQ(st.code(), Code::kNotFound) << st.ToString();
  EXPECT_TRUE(got.empty());
}

TEST_F(BlobClientTest, AServerThatIgnoresTheRangeIsRefusedAndNothingIsTakenTwice) {
  server_.held = data_;
  server_.cut_downloads = 1;  // the first answer breaks off; the second ignores the Range
  server_.ignore_range = true;
  std::string got;
  Status st = Download("/blob", &got, Sha256Hex(data_));
  EXPECT_EQ(st.code(), Code::kInternal) << st.ToString();
  EXPECT_LT(got.size(), data_.size());  // only what the cut answer brought
}

TEST_F(BlobClientTest, CallWithRetryRetriesOnlyUnavailable) {
  server_.fail_before_append = 2;
  Request put;
  put.method = "PUT";
  put.path = "/blob?offset=0";
  put.body = "abc";
  put.headers = {{"X-Content-Sha256", Sha256Hex("abc")}};
  ASSERT_TRUE(blob_->CallWithRetry(put).ok());
  EXPECT_EQ(server_.puts, 3);
  EXPECT_EQ(blob_->CallWithRetry(put).status().code(), Code::kFailedPrecondition);  // not again
  EXPECT_EQ(server_.puts, 4);
}

}  // namespace
}  // namespace common::http
