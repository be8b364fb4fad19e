#include "common/status.h"

#include <gtest/gtest.h>

namespace common {
namespace {

TEST(StatusTest, OkAndError) {
  EXPECT_TRUE(Status::Ok().ok());
  Status s = InvalidArgument("must be positive", "resources.nodes");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.field(), "resources.nodes");
  EXPECT_EQ(std::string(CodeName(s.code())), "invalid_argument");
  EXPECT_EQ(s.ToString(), "invalid_argument: must be positive (field resources.nodes)");
}

TEST(StatusTest, CodeFromNameInvertsCodeName) {
  for (int c = static_cast<int>(Code::kOk); c <= static_cast<int>(Code::kInternal); ++c) {
    EXPECT_EQ(CodeFromName(CodeName(static_cast<Code>(c))), static_cast<Code>(c));
  }
  EXPECT_EQ(CodeFromName("no_such_code"), std::nullopt);
  EXPECT_EQ(CodeFromName(""), std::nullopt);
}

TEST(StatusTest, ResultHoldsValueOrStatus) {
  Result<int> r = 7;
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 7);
  Result<int> e = NotFound("no such job");
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), Code::kNotFound);
}

}  // namespace
}  // namespace common
