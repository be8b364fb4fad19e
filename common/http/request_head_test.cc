#include "common/http/request_head.h"

#include <gtest/gtest.h>

namespace common::http {
namespace {

TEST(RequestHeadTest, ReadsWhatTheEdgeNeeds) {
  RequestHead h = ParseRequestHead(
      "POST /v1/jobs?dry_run=1 HTTP/1.1\r\nHost: x\r\ncontent-length:  42 \r\n"
      "AUTHORIZATION: Bearer abc\r\n\r\n");
  EXPECT_EQ(h.error, "");
  EXPECT_EQ(h.method, "POST");
  EXPECT_EQ(h.target, "/v1/jobs?dry_run=1");
  ASSERT_TRUE(h.content_length);
  EXPECT_EQ(*h.content_length, 42u);
  EXPECT_TRUE(h.has_bearer);
  EXPECT_FALSE(h.has_transfer_encoding);
  EXPECT_FALSE(h.has_content_encoding);
}

TEST(RequestHeadTest, NoLengthMeansNoBody) {
  RequestHead h = ParseRequestHead("POST /v1/jobs/1/cancel HTTP/1.1\nHost: x\n\n");
  EXPECT_EQ(h.error, "");
  EXPECT_FALSE(h.content_length);
  EXPECT_FALSE(h.has_bearer);
}

TEST(RequestHeadTest, EncodingsAndChunking) {
  RequestHead h = ParseRequestHead(
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Encoding: gzip\r\n\r\n");
  EXPECT_TRUE(h.has_transfer_encoding);
  EXPECT_TRUE(h.has_content_encoding);
  h = ParseRequestHead(
      "POST / HTTP/1.1\r\nTransfer-Encoding: identity\r\nContent-Encoding: identity\r\n\r\n");
  EXPECT_FALSE(h.has_transfer_encoding);
  EXPECT_FALSE(h.has_content_encoding);
  // "Basic" or a bare word is not a bearer token.
  EXPECT_FALSE(ParseRequestHead("GET / HTTP/1.1\r\nAuthorization: Basic eA==\r\n\r\n").has_bearer);
}

TEST(RequestHeadTest, RefusesLengthsThatCannotBeServed) {
  EXPECT_EQ(
      ParseRequestHead("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n").error,
      "conflicting Content-Length");
  EXPECT_EQ(
      ParseRequestHead("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n").error,
      "");
  for (const char* bad :
       {"-1", "-0", "+5", "0x10", "", "99999999999999999999", "9223372036854775808", "5 5"}) {
    EXPECT_NE(
        ParseRequestHead(std::string("POST / HTTP/1.1\r\nContent-Length: ") + bad + "\r\n\r\n")
            .error,
        "")
        << bad;
  }
  EXPECT_NE(ParseRequestHead("garbage\r\n\r\n").error, "");
  EXPECT_NE(ParseRequestHead("").error, "");
}

TEST(RequestHeadTest, TargetPathAndQuery) {
  EXPECT_EQ(TargetPath("/v1/jobs/7/logs?follow=1&rank=0"), "/v1/jobs/7/logs");
  EXPECT_EQ(TargetPath("/healthz"), "/healthz");
  EXPECT_EQ(QueryValue("/v1/jobs/7/logs?rank=0&follow=1", "follow"), "1");
  EXPECT_EQ(QueryValue("/v1/jobs/7/logs?follow", "follow"), "");
  EXPECT_EQ(QueryValue("/v1/jobs/7/logs?nofollow=1", "follow"), "");
  EXPECT_EQ(QueryValue("/v1/jobs/7/logs", "follow"), "");
}

}  // namespace
}  // namespace common::http
