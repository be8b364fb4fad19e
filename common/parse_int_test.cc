#include "common/parse_int.h"

#include <gtest/gtest.h>

namespace common {
namespace {

TEST(ParseInt64Test, AcceptsPlainDecimals) {
  struct Case {
    const char* text;
    int64_t want;
  } cases[] = {{"0", 0},
               {"7", 7},
               {"-7", -7},
               {"007", 7},
               {"9223372036854775807", INT64_MAX},
               {"-9223372036854775808", INT64_MIN}};
  for (const auto& c : cases) {
    auto v = ParseInt64(c.text);
    ASSERT_TRUE(v.ok()) << c.text << ": " << v.status().ToString();
    EXPECT_EQ(*v, c.want) << c.text;
  }
}

TEST(ParseInt64Test, RefusesAnythingElse) {
  for (const char* text : {"", "+", "-", "+1", " 1", "1 ", "\t1", "1\n", "0x10", "1e3", "1.0",
                           "12abc", "--1", "- 1", "１", "9223372036854775808",
                           "-9223372036854775809", "99999999999999999999999"}) {
    auto v = ParseInt64(text);
    ASSERT_FALSE(v.ok()) << "'" << text << "' parsed as " << *v;
    EXPECT_EQ(v.status().code(), Code::kInvalidArgument) << text;
  }
}

TEST(ParseInt64Test, BoundsAreInclusiveAndNamed) {
  EXPECT_EQ(*ParseInt64("1", 1, 10), 1);
  EXPECT_EQ(*ParseInt64("10", 1, 10), 10);
  auto low = ParseInt64("0", 1, 10, "limit");
  ASSERT_FALSE(low.ok());
  EXPECT_EQ(low.status().field(), "limit");
  EXPECT_EQ(low.status().message(), "expects an integer in [1, 10], got '0'");
  auto bad = ParseInt64("ten", 1, 10, "limit");
  EXPECT_EQ(bad.status().message(), "expects a decimal integer, got 'ten'");
  EXPECT_FALSE(ParseInt64("11", 1, 10).ok());
  // A huge input is not echoed whole.
  auto huge = ParseInt64(std::string(1000, '9'), 0, 5);
  ASSERT_FALSE(huge.ok());
  EXPECT_LT(huge.status().message().size(), 100u);
}

TEST(ParseIntTest, IntRange) {
  EXPECT_EQ(*ParseInt("65535", 0, 65535), 65535);
  EXPECT_FALSE(ParseInt("65536", 0, 65535).ok());
  EXPECT_FALSE(ParseInt("4294967296", 0, 65535).ok());
}

}  // namespace
}  // namespace common
