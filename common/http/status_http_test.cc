#include "common/http/status_http.h"

#include <gtest/gtest.h>

namespace common::http {
namespace {

constexpr Code kEveryCode[] = {
    Code::kInvalidArgument,   Code::kUnimplemented,      Code::kNotFound,
    Code::kAlreadyExists,     Code::kFailedPrecondition, Code::kUnauthenticated,
    Code::kPermissionDenied,  Code::kResourceExhausted,  Code::kUnavailable,
    Code::kUnprocessable,     Code::kPreconditionFailed, Code::kInternal};

TEST(StatusHttpTest, HttpStatusPerCode) {
  struct Case {
    Code code;
    int http;
  } cases[] = {{Code::kOk, 200},
               {Code::kInvalidArgument, 400},
               {Code::kUnimplemented, 400},
               {Code::kNotFound, 404},
               {Code::kAlreadyExists, 409},
               {Code::kFailedPrecondition, 409},
               {Code::kUnauthenticated, 401},
               {Code::kPermissionDenied, 403},
               {Code::kResourceExhausted, 429},
               {Code::kUnavailable, 503},
               {Code::kUnprocessable, 422},
               {Code::kPreconditionFailed, 412},
               {Code::kInternal, 500}};
  for (const auto& c : cases) EXPECT_EQ(HttpStatusFor(c.code), c.http) << CodeName(c.code);
}

TEST(StatusHttpTest, ErrorBodyCarriesCodeMessageAndField) {
  auto j = ErrorBody(InvalidArgument("must be >= 1", "resources.nodes"));
  EXPECT_EQ(j["error"]["code"], "invalid_argument");
  EXPECT_EQ(j["error"]["message"], "must be >= 1");
  EXPECT_EQ(j["error"]["field"], "resources.nodes");
  auto k = ErrorBody(NotFound("job 7 not found"));
  EXPECT_EQ(k["error"]["code"], "not_found");
  EXPECT_FALSE(k["error"].contains("field"));
  // A message with bytes that are not UTF-8 still makes a body (replaced, not thrown).
  EXPECT_NE(ErrorBodyText(InvalidArgument("bad \xff byte")).find("invalid_argument"),
            std::string::npos);
}

// What the server writes, a client reads back: same code, message and field, for every code.
TEST(StatusHttpTest, EveryCodeSurvivesTheRoundTrip) {
  for (Code code : kEveryCode) {
    const Status sent(code, "what went wrong", "spec.field");
    const Status got = StatusFromResponse(HttpStatusFor(code), ErrorBodyText(sent));
    EXPECT_EQ(got.code(), code) << CodeName(code);
    EXPECT_EQ(got.message(), "what went wrong") << CodeName(code);
    EXPECT_EQ(got.field(), "spec.field") << CodeName(code);
    const Status no_field(code, "m");
    EXPECT_EQ(StatusFromResponse(HttpStatusFor(code), ErrorBodyText(no_field)).field(), "");
  }
}

TEST(StatusHttpTest, DecodesAnswersThatAreNotOurs) {
  struct Case {
    int http;
    const char* body;
    Code want;
    const char* message;
  } cases[] = {
      // Not JSON: the code from the HTTP status, the start of the body as the message.
      {502, "<html>Bad Gateway</html>", Code::kUnavailable, "HTTP 502: <html>Bad Gateway</html>"},
      {504, "", Code::kUnavailable, "HTTP 504"},
      {404, "Not Found", Code::kNotFound, "HTTP 404: Not Found"},
      {401, "", Code::kUnauthenticated, "HTTP 401"},
      {403, "nope", Code::kPermissionDenied, "HTTP 403: nope"},
      {429, "slow down", Code::kResourceExhausted, "HTTP 429: slow down"},
      {413, "", Code::kInvalidArgument, "HTTP 413"},
      {405, "", Code::kInvalidArgument, "HTTP 405"},
      {500, "", Code::kInternal, "HTTP 500"},
      {501, "", Code::kUnimplemented, "HTTP 501"},
      {302, "", Code::kInternal, "HTTP 302"},
      // JSON, but not an error body.
      {400, "[1,2]", Code::kInvalidArgument, "HTTP 400: [1,2]"},
      {400, R"({"message":"x"})", Code::kInvalidArgument, R"(HTTP 400: {"message":"x"})"},
      {400, R"({"error":"bad"})", Code::kInvalidArgument, R"(HTTP 400: {"error":"bad"})"},
      // An error body whose code is unknown, missing, ok, or contradicts the status: the
      // message is kept, the code comes from the status.
      {409, R"({"error":{"code":"teapot","message":"m1"}})", Code::kFailedPrecondition, "m1"},
      {404, R"({"error":{"message":"m2"}})", Code::kNotFound, "m2"},
      {400, R"({"error":{"code":"ok","message":"m3"}})", Code::kInvalidArgument, "m3"},
      {503, R"({"error":{"code":"not_found","message":"m4"}})", Code::kUnavailable, "m4"},
      {500, R"({"error":{"code":42,"message":7}})", Code::kInternal, "HTTP 500"},
      // 409 and 400 each stand for two codes: the body tells them apart.
      {409, R"({"error":{"code":"already_exists","message":"m5"}})", Code::kAlreadyExists, "m5"},
      {400, R"({"error":{"code":"unimplemented","message":"m6"}})", Code::kUnimplemented, "m6"},
  };
  for (const auto& c : cases) {
    const Status got = StatusFromResponse(c.http, c.body);
    EXPECT_EQ(got.code(), c.want) << c.http << " " << c.body;
    EXPECT_EQ(got.message(), c.message) << c.http << " " << c.body;
  }
  // A long body that is not ours is cut in the message.
  EXPECT_LT(StatusFromResponse(502, std::string(10000, 'x')).message().size(), 300u);
}

}  // namespace
TEST(StatusHttpTest, OnlyUnavailableAsksForARetryAfterASecond) {
  EXPECT_EQ(RetryAfterSecondsFor(Code::kUnavailable), 1);
  for (Code c : {Code::kOk, Code::kInvalidArgument, Code::kNotFound, Code::kInternal,
                 Code::kResourceExhausted, Code::kFailedPrecondition}) {
    EXPECT_EQ(RetryAfterSecondsFor(c), 0) << CodeName(c);
  }
}

}  // namespace common::http
