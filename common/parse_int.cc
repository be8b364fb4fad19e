#include "common/parse_int.h"

namespace common {

namespace {

// What the text looked like, for the message; bounded so a megabyte of digits is not echoed.
std::string Quoted(std::string_view text) {
  constexpr size_t kMaxShown = 40;
  std::string out = "'";
  out += text.substr(0, kMaxShown);
  if (text.size() > kMaxShown) out += "...";
  return out + "'";
}

Status OutOfRange(std::string_view text, int64_t min, int64_t max, const std::string& field) {
  return InvalidArgument(
      "expects an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "], got " +
          Quoted(text),
      field);
}

}  // namespace

Result<int64_t> ParseInt64(std::string_view text, int64_t min, int64_t max,
                           const std::string& field) {
  size_t i = 0;
  const bool negative = !text.empty() && text[0] == '-';
  if (negative) i = 1;
  if (i == text.size()) {
    return InvalidArgument("expects a decimal integer, got " + Quoted(text), field);
  }
  // Accumulated as a negative number: |INT64_MIN| does not fit in a positive int64.
  int64_t value = 0;
  bool overflow = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c < '0' || c > '9') {
      return InvalidArgument("expects a decimal integer, got " + Quoted(text), field);
    }
    const int digit = c - '0';
    if (value < (std::numeric_limits<int64_t>::min() + digit) / 10) overflow = true;
    if (!overflow) value = value * 10 - digit;
  }
  if (!negative) {
    if (overflow || value == std::numeric_limits<int64_t>::min()) {
      return OutOfRange(text, min, max, field);
    }
    value = -value;
  }
  if (overflow || value < min || value > max) return OutOfRange(text, min, max, field);
  return value;
}

Result<int> ParseInt(std::string_view text, int min, int max, const std::string& field) {
  auto v = ParseInt64(text, min, max, field);
  if (!v.ok()) return v.status();
  return static_cast<int>(*v);
}

}  // namespace common
