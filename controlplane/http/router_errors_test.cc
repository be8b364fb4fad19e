// What an error answer tells a client: the code, and for a failure inside the server (a database's
// own message, an internal error) a generic text with the request id, never the detail.
#include <httplib.h>

#include <gtest/gtest.h>

#include "controlplane/http/router.h"

namespace controlplane::http {
namespace {

TEST(RespondErrorTest, InternalDetailStaysInTheServersLog) {
  httplib::Response res;
  RespondError(res, common::Internal("database: relation \"tokens\" column sha256 secret-value"));
  EXPECT_EQ(res.status, 500);
  EXPECT_EQ(res.body.find("tokens"), std::string::npos) << res.body;
  EXPECT_EQ(res.body.find("secret-value"), std::string::npos) << res.body;
  EXPECT_NE(res.body.find("\"internal\""), std::string::npos) << res.body;
  EXPECT_NE(res.body.find("request id"), std::string::npos) << res.body;

  httplib::Response dup;
  RespondError(dup, common::Status(common::Code::kAlreadyExists,
                                   "database: duplicate key value violates unique constraint "
                                   "\"jobs_idempotency\" DETAIL: Key (key)=(abc)"));
  EXPECT_EQ(dup.status, 409);
  EXPECT_EQ(dup.body.find("jobs_idempotency"), std::string::npos) << dup.body;
  EXPECT_NE(dup.body.find("already_exists"), std::string::npos) << dup.body;
}

TEST(RespondErrorTest, ErrorsMeantForTheClientAreKept) {
  httplib::Response res;
  RespondError(res,
               common::InvalidArgument("resources.nodes must be at least 1", "resources.nodes"));
  EXPECT_EQ(res.status, 400);
  EXPECT_NE(res.body.find("resources.nodes must be at least 1"), std::string::npos) << res.body;
  EXPECT_NE(res.body.find("\"field\""), std::string::npos) << res.body;
}

}  // namespace
}  // namespace controlplane::http
