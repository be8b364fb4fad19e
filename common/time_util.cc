#include "common/time_util.h"

#include <chrono>

namespace common {

int64_t NowMillis() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

double MonotonicSeconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

namespace {

// The civil date (proleptic Gregorian) of a day counted from 1970-01-01, negative before it.
struct CivilDate {
  int64_t year = 1970;
  int month = 1;  // 1-12
  int day = 1;    // 1-31
};

CivilDate CivilFromDays(int64_t days) {
  // H. Hinnant's civil_from_days.
  const int64_t z = days + 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  CivilDate c;
  c.day = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  c.month = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  c.year = yoe + era * 400 + (c.month <= 2);
  return c;
}

// `v` as `width` digits, zero-padded (v >= 0, at most `width` digits).
void AppendDigits(int64_t v, int width, std::string& out) {
  char buf[20];
  for (int i = width - 1; i >= 0; --i, v /= 10) buf[i] = static_cast<char>('0' + v % 10);
  out.append(buf, width);
}

}  // namespace

void AppendTimeMillis(int64_t ms, std::string& out) {
  constexpr int64_t kDayMs = 86'400'000;
  int64_t days = ms / kDayMs;
  if (ms % kDayMs < 0) --days;  // floor: a time before 1970 is in the day before
  const int64_t day_ms = ms - days * kDayMs;
  const CivilDate c = CivilFromDays(days);
  int64_t year = c.year;
  if (year < 0) {
    out += '-';
    year = -year;
  }
  int width = 4;
  for (int64_t y = year; y >= 10000; y /= 10) ++width;
  AppendDigits(year, width, out);
  out += '-';
  AppendDigits(c.month, 2, out);
  out += '-';
  AppendDigits(c.day, 2, out);
  out += 'T';
  AppendDigits(day_ms / 3'600'000, 2, out);
  out += ':';
  AppendDigits(day_ms / 60'000 % 60, 2, out);
  out += ':';
  AppendDigits(day_ms / 1000 % 60, 2, out);
  out += '.';
  AppendDigits(day_ms % 1000, 3, out);
  out += 'Z';
}

std::string FormatTimeMillis(int64_t ms) {
  std::string s;
  s.reserve(24);
  AppendTimeMillis(ms, s);
  return s;
}

namespace {

// Days from 1970-01-01 to the given civil date (proleptic Gregorian), after H. Hinnant's
// days_from_civil: exact for every year the 4-digit format can hold.
int64_t DaysFromCivil(int64_t y, int m, int d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

int DaysInMonth(int y, int m) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return m == 2 && leap ? 29 : kDays[m - 1];
}

}  // namespace

std::optional<int64_t> ParseUtcTime(const std::string& text) {
  // The layout FormatTimeMillis writes, with the milliseconds optional:
  //   YYYY-MM-DDTHH:MM:SSZ or YYYY-MM-DDTHH:MM:SS.fffZ
  //   0123456789012345678901234
  static constexpr char kShape[] = "dddd-dd-ddTdd:dd:dd";
  if (text.size() != 20 && text.size() != 24) return std::nullopt;
  for (size_t i = 0; i < 19; ++i) {
    const char c = text[i];
    const bool ok = kShape[i] == 'd' ? (c >= '0' && c <= '9') : c == kShape[i];
    if (!ok) return std::nullopt;
  }
  if (text.back() != 'Z') return std::nullopt;
  int ms = 0;
  if (text.size() == 24) {
    if (text[19] != '.') return std::nullopt;
    for (size_t i = 20; i < 23; ++i) {
      if (text[i] < '0' || text[i] > '9') return std::nullopt;
      ms = ms * 10 + (text[i] - '0');
    }
  }
  auto number = [&](size_t at, size_t len) {
    int v = 0;
    for (size_t i = at; i < at + len; ++i) v = v * 10 + (text[i] - '0');
    return v;
  };
  const int y = number(0, 4), mo = number(5, 2), d = number(8, 2);
  const int h = number(11, 2), mi = number(14, 2), s = number(17, 2);
  // Before 1970 is no time this system ever recorded; leap seconds (:60) are not written by
  // FormatTimeMillis either, so they would not round-trip.
  if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > DaysInMonth(y, mo) || h > 23 || mi > 59 ||
      s > 59) {
    return std::nullopt;
  }
  const int64_t secs = DaysFromCivil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s;
  return secs * 1000 + ms;
}

}  // namespace common
