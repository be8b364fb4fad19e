// Wall-clock helpers. Times cross process boundaries as milliseconds since the Unix epoch or as
// RFC 3339 strings in UTC.
#pragma once

#include <cstdint>
#include <string>

namespace common {

int64_t NowMillis();
// Monotonic seconds, for measuring durations.
double MonotonicSeconds();
// "2026-11-22T00:38:49.123Z"
std::string FormatTimeMillis(int64_t ms);

}  // namespace common
