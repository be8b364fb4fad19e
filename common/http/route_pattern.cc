#include "common/http/route_pattern.h"

#include <stdexcept>
#include <string_view>

namespace common::http {

std::string PatternRegex(const std::string& pattern) {
  std::string regex;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '{') {
      const size_t close = pattern.find('}', i);
      if (close == std::string::npos) {
        throw std::invalid_argument("route pattern with an unclosed '{': " + pattern);
      }
      regex += pattern.compare(i, close - i + 1, "{id}") == 0 ? R"((\d+))" : "([^/]+)";
      i = close;
    } else if (std::string_view(R"(\^$.|?*+()[]})").find(c) != std::string_view::npos) {
      regex += '\\';
      regex += c;
    } else {
      regex += c;
    }
  }
  return regex;
}

}  // namespace common::http
