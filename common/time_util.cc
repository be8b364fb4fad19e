#include "common/time_util.h"

#include <chrono>
#include <cstdio>
#include <ctime>

namespace common {

int64_t NowMillis() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

double MonotonicSeconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

std::string FormatTimeMillis(int64_t ms) {
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms % 1000));
  return buf;
}

std::optional<int64_t> ParseUtcTime(const std::string& text) {
  int y, mo, d, h, mi, s, used = 0;
  if (text.size() < 20 || text.size() > 40 ||
      std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &s, &used) != 6 ||
      used != 19) {
    return std::nullopt;
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60 || y < 1970) {
    return std::nullopt;
  }
  size_t i = 19;
  int64_t ms = 0;
  if (text[i] == '.') {
    int digits = 0;
    for (++i; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, ++digits) {
      if (digits < 3) ms = ms * 10 + (text[i] - '0');
    }
    if (digits == 0) return std::nullopt;
    for (int k = digits; k < 3; ++k) ms *= 10;
  }
  const std::string zone = text.substr(i);
  if (zone != "Z" && zone != "z" && zone != "+00:00") return std::nullopt;
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  const std::time_t secs = timegm(&tm);
  // timegm normalises 31 February into March: a date that moved was not a date.
  if (tm.tm_mday != d || tm.tm_mon != mo - 1) return std::nullopt;
  return static_cast<int64_t>(secs) * 1000 + ms;
}

}  // namespace common
