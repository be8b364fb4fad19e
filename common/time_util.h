// Wall-clock helpers. Times cross process boundaries as milliseconds since the Unix epoch or as
// RFC 3339 strings in UTC.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace common {

int64_t NowMillis();
// Monotonic seconds, for measuring durations.
double MonotonicSeconds();
// The seconds from `a` to `b`.
inline double SecondsBetween(std::chrono::steady_clock::time_point a,
                             std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}
// "2026-11-22T00:38:49.123Z": UTC on the proleptic Gregorian calendar (a year past 9999 has more
// digits).
std::string FormatTimeMillis(int64_t ms);
// The same text appended to `out` (a page of a thousand jobs writes some four per job).
void AppendTimeMillis(int64_t ms, std::string& out);
// The inverse, and nothing looser: exactly YYYY-MM-DDTHH:MM:SSZ or YYYY-MM-DDTHH:MM:SS.fffZ
// (ASCII digits only, a real calendar date from 1970 on, hours 0-23, minutes and seconds 0-59).
// nullopt for anything else: other offsets, other fraction lengths, blanks, signs.
// FormatTimeMillis and this are the only two places that know the layout.
std::optional<int64_t> ParseUtcTime(const std::string& text);

}  // namespace common
