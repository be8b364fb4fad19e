#include "common/time_util.h"

#include <cstdio>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace common {
namespace {

TEST(TimeUtilTest, ParseIsTheInverseOfFormat) {
  for (int64_t ms : {int64_t{0}, int64_t{1795394329123}, int64_t{1700000000000},
                     int64_t{951782400000} /* 2000-02-29 */, int64_t{253402300799999}}) {
    auto back = ParseUtcTime(FormatTimeMillis(ms));
    ASSERT_TRUE(back.has_value()) << FormatTimeMillis(ms);
    EXPECT_EQ(*back, ms);
  }
  EXPECT_EQ(ParseUtcTime("2026-11-23T10:00:00Z"), ParseUtcTime("2026-11-23T10:00:00.000Z"));
  EXPECT_EQ(*ParseUtcTime("1970-01-01T00:00:01.500Z"), 1500);
  EXPECT_EQ(*ParseUtcTime("2024-02-29T23:59:59Z"), 1709251199000);
  EXPECT_EQ(*ParseUtcTime("9999-12-31T23:59:59.999Z"), 253402300799999);
}

// What the C library's calendar says `ms` is, in FormatTimeMillis's layout.
std::string ByGmtime(int64_t ms) {
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms % 1000));
  return buf;
}

TEST(TimeUtilTest, FormatAgreesWithTheCLibrarysCalendar) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> any(0, 253402300799999);  // to 9999-12-31
  std::vector<int64_t> times = {0,
                                999,
                                86399999,
                                86400000,
                                951782400000,
                                951868799999,
                                4107542400000 /* 2100-03-01 */,
                                253402300799999,
                                253402300800000 /* year 10000 */};
  for (int i = 0; i < 100000; ++i) times.push_back(any(rng));
  for (int64_t ms : times) {
    ASSERT_EQ(FormatTimeMillis(ms), ByGmtime(ms)) << ms;
    std::string appended = "x";
    AppendTimeMillis(ms, appended);
    ASSERT_EQ(appended, "x" + ByGmtime(ms)) << ms;
  }
  // Before 1970, the day before (gmtime's seconds count toward zero, the calendar does not).
  EXPECT_EQ(FormatTimeMillis(-1), "1969-12-31T23:59:59.999Z");
  EXPECT_EQ(FormatTimeMillis(-86400001), "1969-12-30T23:59:59.999Z");
  EXPECT_EQ(FormatTimeMillis(-62135596800000), "0001-01-01T00:00:00.000Z");
}

TEST(TimeUtilTest, RejectsWhatIsNotAUtcTime) {
  for (const char* bad : {
           "", "2026-11-23", "2026-11-23T10:00:00", "2026-11-23T10:00:00+01:00",
           "2026-02-31T00:00:00Z", "2026-13-01T00:00:00Z", "2026-11-23T10:00:00.Z",
           "2026-11-23 10:00:00Z", "2026-11-23T10:00:00Zjunk", "tomorrow",
           // What sscanf's %d used to let through: blanks and signs inside fields.
           "2026- 1-01T00:00:00Z", "2026-1-01T00:00:00Z", "2026-01- 1T00:00:00Z",
           "2026-+1-01T00:00:00Z", "+2026-01-01T00:00:00Z", " 2026-01-01T00:00:00Z",
           "2026-01-01T 0:00:00Z", "2026-01-01T00:-0:00Z", "2026-01-01T00:00:00Z ",
           // Other offsets and fraction lengths, lower-case letters.
           "2026-11-23T10:00:00.000+00:00", "2026-11-23T10:00:00+00:00", "2026-11-23T10:00:00z",
           "2026-11-23t10:00:00Z", "1970-01-01T00:00:01.5Z", "1970-01-01T00:00:01.50Z",
           "1970-01-01T00:00:01.5000Z", "1970-01-01T00:00:01.-50Z", "1970-01-01T00:00:01,500Z",
           // Field ranges.
           "2025-02-29T00:00:00Z", "2100-02-29T00:00:00Z", "2026-04-31T00:00:00Z",
           "2026-00-10T00:00:00Z", "2026-01-00T00:00:00Z", "2026-01-01T24:00:00Z",
           "2026-01-01T00:60:00Z", "2026-01-01T00:00:60Z", "1969-12-31T23:59:59Z",
           "0000-01-01T00:00:00Z"}) {
    EXPECT_FALSE(ParseUtcTime(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace common
