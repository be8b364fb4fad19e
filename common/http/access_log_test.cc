#include "common/http/access_log.h"

#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/request_id.h"

namespace common::http {
namespace {

using nlohmann::json;

// A server whose routes are wrapped in the middleware; what it logs is captured from stderr.
class AccessLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.Get("/ok", WithAccessLog("GET", "/ok",
                                     [](const httplib::Request&, httplib::Response& res,
                                        ServedCall& call) {
                                       res.set_content(call.request_id, "text/plain");
                                       call.log_fields.push_back({"tenant", "acme"});
                                     }));
    server_.Get(R"(/items/(\d+))",
                WithAccessLog("GET", "/items/{id}",
                              [](const httplib::Request&, httplib::Response& res, ServedCall&) {
                                res.status = 404;
                              }));
    server_.Get("/throws", WithAccessLog("GET", "/throws",
                                         [](const httplib::Request&, httplib::Response&,
                                            ServedCall&) { throw std::runtime_error("boom"); }));
    server_.Get("/healthz", WithAccessLog("GET", "/healthz",
                                          [](const httplib::Request&, httplib::Response&,
                                             ServedCall&) {}));
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::yield();
    client_ = std::make_unique<httplib::Client>("127.0.0.1", port_);
  }
  void TearDown() override {
    server_.stop();
    thread_.join();
  }

  // The access line for the call with `request_id` in `log`; null when there is none.
  static json LineFor(const std::string& log, const std::string& request_id) {
    std::istringstream lines(log);
    std::string line;
    json found;
    while (std::getline(lines, line)) {
      json j = json::parse(line, nullptr, false);
      if (!j.is_discarded() && j.value("msg", "") == "http request" &&
          j.value("request_id", "") == request_id) {
        found = j;
      }
    }
    return found;
  }

  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(AccessLogTest, EchoesTheCallersIdAndLogsOneLine) {
  ::testing::internal::CaptureStderr();
  auto r = client_->Get("/ok", httplib::Headers{{kRequestIdHeader, "abc-123_x.y:z"}});
  std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);  // no status set: 200
  EXPECT_EQ(r->get_header_value(kRequestIdHeader), "abc-123_x.y:z");
  EXPECT_EQ(r->body, "abc-123_x.y:z");  // the handler is given the same id
  json line = LineFor(log, "abc-123_x.y:z");
  ASSERT_FALSE(line.is_null()) << log;
  EXPECT_EQ(line["method"], "GET");
  EXPECT_EQ(line["route"], "/ok");
  EXPECT_EQ(line["status"], "200");
  EXPECT_EQ(line["level"], "info");
  EXPECT_EQ(line["tenant"], "acme");
  EXPECT_GE(std::stod(line["ms"].get<std::string>()), 0.0);
  EXPECT_EQ(line["remote"], "127.0.0.1");
}

TEST_F(AccessLogTest, ReplacesUnsafeIdsAndNamesThePatternNotThePath) {
  ::testing::internal::CaptureStderr();
  auto r = client_->Get("/items/77", httplib::Headers{{kRequestIdHeader, "bad id\"{}"}});
  std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  const std::string id = r->get_header_value(kRequestIdHeader);
  EXPECT_EQ(id.size(), 16u);
  json line = LineFor(log, id);
  ASSERT_FALSE(line.is_null()) << log;
  EXPECT_EQ(line["route"], "/items/{id}");
  EXPECT_EQ(line["level"], "warn");
  EXPECT_EQ(log.find("/items/77"), std::string::npos) << log;
}

TEST_F(AccessLogTest, AThrowingHandlerIsA500WithAnErrorBody) {
  ::testing::internal::CaptureStderr();
  auto r = client_->Get("/throws");
  std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 500);
  json body = json::parse(r->body, nullptr, false);
  ASSERT_FALSE(body.is_discarded()) << r->body;
  EXPECT_EQ(body["error"]["code"], "internal");
  EXPECT_EQ(body["error"]["message"], "internal error");  // what was thrown stays in the log
  json line = LineFor(log, r->get_header_value(kRequestIdHeader));
  ASSERT_FALSE(line.is_null()) << log;
  EXPECT_EQ(line["level"], "error");
  EXPECT_NE(log.find("boom"), std::string::npos);
}

TEST(AccessLogLevelTest, ProbesQuietErrorsLoud) {
  EXPECT_EQ(AccessLogLevel("/metrics", 200), LogLevel::kDebug);
  EXPECT_EQ(AccessLogLevel("/healthz", 200), LogLevel::kDebug);
  EXPECT_EQ(AccessLogLevel("/readyz", 200), LogLevel::kDebug);
  EXPECT_EQ(AccessLogLevel("/readyz", 503), LogLevel::kError);
  EXPECT_EQ(AccessLogLevel("/v1/jobs", 200), LogLevel::kInfo);
  EXPECT_EQ(AccessLogLevel("/v1/jobs", 401), LogLevel::kWarn);
  EXPECT_EQ(AccessLogLevel("/v1/jobs", 500), LogLevel::kError);
}

}  // namespace
}  // namespace common::http
