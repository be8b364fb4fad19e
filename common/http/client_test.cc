#include "common/http/client.h"

#include <httplib.h>

#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "common/http/status_http.h"
#include "common/request_id.h"
#include "common/testing/local_http_server.h"

namespace common::http {
namespace {

// A server on a free loopback port that records what it was sent and answers as scripted.
class RecordingServer {
 public:
  RecordingServer() {
    auto record = [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mu_);
      last = req;
      res.status = status;
      res.set_header("ETag", "\"v3\"");
      res.set_content(reply, "application/json");
    };
    http_.server().Get(".*", record);
    http_.server().Post(".*", record);
    http_.server().Put(".*", record);
    http_.server().Patch(".*", record);
    http_.server().Delete(".*", record);
    http_.Start();
  }
  std::string url() const { return http_.url(); }
  httplib::Request Last() {
    std::lock_guard<std::mutex> lock(mu_);
    return last;
  }

  int status = 200;
  std::string reply = "{}";

 private:
  std::mutex mu_;
  httplib::Request last;
  testing::LocalHttpServer http_;  // last: stopped before the state its routes use goes
};

Request Req(std::string method, std::string path, std::string body = "") {
  Request r;
  r.method = std::move(method);
  r.path = std::move(path);
  r.body = std::move(body);
  return r;
}

std::unique_ptr<Client> Make(const std::string& url, const std::string& token = "") {
  auto c = Client::Create({url, 2, 5, 5, token, /*ca_file=*/"", {}});
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(*c) : nullptr;
}

TEST(SplitBaseUrlTest, OriginAndPrefix) {
  EXPECT_EQ(*SplitBaseUrl("http://h:1"), std::make_pair(std::string("http://h:1"), std::string()));
  EXPECT_EQ(*SplitBaseUrl("https://h:1/p/q/"),
            std::make_pair(std::string("https://h:1"), std::string("/p/q")));
  for (const char* bad : {"", "h:1", "ftp://h", "http://", "http:///x", "http://:80"}) {
    EXPECT_FALSE(SplitBaseUrl(bad).ok()) << bad;
    ClientOptions options;
    options.base_url = bad;
    EXPECT_FALSE(Client::Create(options).ok()) << bad;
  }
}

TEST(ClientTest, EveryCallCarriesTokenRequestIdAndPrefix) {
  RecordingServer server;
  auto client = Make(server.url() + "/base/", "secret-1");
  server.reply = R"({"id": 4})";
  Request post = Req("POST", "/v1/jobs?x=1", R"({"a":1})");
  post.headers = {{"Idempotency-Key", "k1"}};
  auto r = client->Call(post);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, R"({"id": 4})");
  EXPECT_EQ(r->Header("etag"), "\"v3\"");
  httplib::Request seen = server.Last();
  EXPECT_EQ(seen.method, "POST");
  EXPECT_EQ(seen.path, "/base/v1/jobs");
  EXPECT_EQ(seen.get_param_value("x"), "1");
  EXPECT_EQ(seen.body, R"({"a":1})");
  EXPECT_EQ(seen.get_header_value("Authorization"), "Bearer secret-1");
  EXPECT_EQ(seen.get_header_value("Idempotency-Key"), "k1");
  const std::string first_id = seen.get_header_value(kRequestIdHeader);
  EXPECT_TRUE(IsSafeRequestId(first_id)) << first_id;
  EXPECT_EQ(r->request_id, first_id);

  // A fresh id per call, the caller's when it gives a safe one, never an unsafe one.
  ASSERT_TRUE(client->Call(Req("GET", "/x")).ok());
  EXPECT_NE(server.Last().get_header_value(kRequestIdHeader), first_id);
  Request with_id = Req("GET", "/x");
  with_id.request_id = "trace-7";
  ASSERT_TRUE(client->Call(with_id).ok());
  EXPECT_EQ(server.Last().get_header_value(kRequestIdHeader), "trace-7");
  with_id.request_id = "two words";
  ASSERT_TRUE(client->Call(with_id).ok());
  EXPECT_EQ(server.Last().get_header_value(kRequestIdHeader).size(), 16u);

  client->SetBearerToken("secret-2");
  for (const char* method : {"PUT", "PATCH", "DELETE"}) {
    ASSERT_TRUE(client->Call(Req(method, "/m", "{}")).ok()) << method;
    EXPECT_EQ(server.Last().method, method);
    EXPECT_EQ(server.Last().get_header_value("Authorization"), "Bearer secret-2");
  }
  EXPECT_EQ(client->Call(Req("TRACE", "/m")).status().code(), Code::kInvalidArgument);
}

TEST(ClientTest, ErrorsAreDecodedIntoTheServersStatus) {
  RecordingServer server;
  auto client = Make(server.url());
  server.status = 404;
  server.reply = ErrorBodyText(NotFound("job 9 not found"));
  auto sent = client->Send(Req("GET", "/v1/jobs/9"));
  ASSERT_TRUE(sent.ok());  // Send hands back any answer
  EXPECT_EQ(sent->status, 404);
  auto r = client->Call(Req("GET", "/v1/jobs/9"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_EQ(r.status().message(), "job 9 not found");
  server.status = 400;
  server.reply = ErrorBodyText(InvalidArgument("must be >= 1", "resources.nodes"));
  r = client->Call(Req("POST", "/v1/jobs", "{}"));
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(r.status().field(), "resources.nodes");
}

TEST(ClientTest, StreamsTheBodyOrDecodesTheError) {
  RecordingServer server;
  auto client = Make(server.url());
  server.reply = "line 1\nline 2\n";
  std::string got;
  ASSERT_TRUE(client->Stream("/logs", [&](const char* d, size_t n) { got.append(d, n); }, 10).ok());
  EXPECT_EQ(got, "line 1\nline 2\n");
  EXPECT_TRUE(IsSafeRequestId(server.Last().get_header_value(kRequestIdHeader)));
  server.status = 403;
  server.reply = ErrorBodyText(Status(Code::kPermissionDenied, "not yours"));
  got.clear();
  Status st = client->Stream("/logs", [&](const char* d, size_t n) { got.append(d, n); }, 10);
  EXPECT_EQ(st.code(), Code::kPermissionDenied);
  EXPECT_EQ(st.message(), "not yours");
  EXPECT_EQ(got, "");
}

TEST(ClientTest, NoAnswerIsUnavailableNamingTheRequest) {
  // Port 1 on loopback: nothing listens, the connection is refused at once.
  auto client = Make("http://127.0.0.1:1");
  Request req = Req("GET", "/healthz");
  req.request_id = "probe-1";
  auto r = client->Call(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_NE(r.status().message().find("request probe-1"), std::string::npos)
      << r.status().message();
  EXPECT_EQ(client->Stream("/x", [](const char*, size_t) {}, 1).code(), Code::kUnavailable);
}

}  // namespace
}  // namespace common::http
