// Wall-clock helpers. Times cross process boundaries as milliseconds since the Unix epoch or as
// RFC 3339 strings in UTC.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace common {

int64_t NowMillis();
// Monotonic seconds, for measuring durations.
double MonotonicSeconds();
// "2026-11-22T00:38:49.123Z"
std::string FormatTimeMillis(int64_t ms);
// The inverse for RFC 3339 times in UTC ("Z" or "+00:00"), with or without fractional seconds
// (milliseconds kept): nullopt for anything else.
std::optional<int64_t> ParseUtcTime(const std::string& text);

}  // namespace common
