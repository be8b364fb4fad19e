#include "common/time_util.h"

#include <gtest/gtest.h>

namespace common {
namespace {

TEST(TimeUtilTest, ParseIsTheInverseOfFormat) {
  for (int64_t ms : {int64_t{0}, int64_t{1795394329123}, int64_t{1700000000000}}) {
    auto back = ParseUtcTime(FormatTimeMillis(ms));
    ASSERT_TRUE(back.has_value()) << FormatTimeMillis(ms);
    EXPECT_EQ(*back, ms);
  }
  EXPECT_EQ(ParseUtcTime("2026-11-23T10:00:00Z"), ParseUtcTime("2026-11-23T10:00:00.000+00:00"));
  EXPECT_EQ(*ParseUtcTime("1970-01-01T00:00:01.5Z"), 1500);
}

TEST(TimeUtilTest, RejectsWhatIsNotAUtcTime) {
  for (const char* bad : {"", "2026-11-23", "2026-11-23T10:00:00", "2026-11-23T10:00:00+01:00",
                          "2026-02-31T00:00:00Z", "2026-13-01T00:00:00Z", "2026-11-23T10:00:00.Z",
                          "2026-11-23 10:00:00Z", "2026-11-23T10:00:00Zjunk", "tomorrow"}) {
    EXPECT_FALSE(ParseUtcTime(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace common
