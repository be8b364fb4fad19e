#include "common/request_id.h"

#include <gtest/gtest.h>

namespace common {
namespace {

TEST(RequestIdTest, SafeIdsAreHonoured) {
  EXPECT_EQ(RequestIdFor("abc-123"), "abc-123");
  EXPECT_EQ(RequestIdFor("trace:4bf92f35.00f0_x"), "trace:4bf92f35.00f0_x");
  EXPECT_EQ(RequestIdFor(std::string(128, 'a')), std::string(128, 'a'));
}

TEST(RequestIdTest, UnsafeIdsAreReplaced) {
  for (const std::string& bad : {std::string(), std::string(129, 'a'), std::string("a b"),
                                std::string("a\"b"), std::string("a\nb"), std::string("a/b")}) {
    std::string id = RequestIdFor(bad);
    EXPECT_NE(id, bad);
    EXPECT_EQ(id.size(), 16u);
    EXPECT_TRUE(IsSafeRequestId(id)) << id;
  }
  EXPECT_NE(RequestIdFor(""), RequestIdFor(""));
}

}  // namespace
}  // namespace common
