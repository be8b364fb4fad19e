#include "controlplane/http/status_http.h"

#include <gtest/gtest.h>

namespace controlplane::http {
namespace {

using common::Code;

TEST(StatusHttpTest, MapsEveryCodePerContract) {
  EXPECT_EQ(HttpStatusFor(Code::kOk), 200);
  EXPECT_EQ(HttpStatusFor(Code::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusFor(Code::kUnimplemented), 400);
  EXPECT_EQ(HttpStatusFor(Code::kNotFound), 404);
  EXPECT_EQ(HttpStatusFor(Code::kAlreadyExists), 409);
  EXPECT_EQ(HttpStatusFor(Code::kFailedPrecondition), 409);
  EXPECT_EQ(HttpStatusFor(Code::kUnauthenticated), 401);
  EXPECT_EQ(HttpStatusFor(Code::kPermissionDenied), 403);
  EXPECT_EQ(HttpStatusFor(Code::kResourceExhausted), 429);
  EXPECT_EQ(HttpStatusFor(Code::kUnavailable), 503);
  EXPECT_EQ(HttpStatusFor(Code::kInternal), 500);
}

TEST(StatusHttpTest, ErrorBodyCarriesCodeMessageAndField) {
  auto j = ErrorBody(common::InvalidArgument("must be >= 1", "resources.nodes"));
  EXPECT_EQ(j["error"]["code"], "invalid_argument");
  EXPECT_EQ(j["error"]["message"], "must be >= 1");
  EXPECT_EQ(j["error"]["field"], "resources.nodes");
  auto k = ErrorBody(common::NotFound("job 7 not found"));
  EXPECT_EQ(k["error"]["code"], "not_found");
  EXPECT_FALSE(k["error"].contains("field"));
}

}  // namespace
}  // namespace controlplane::http
