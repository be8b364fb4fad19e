// libFuzzer target: common::ParseUtcTime, which reads token expiries and metrics `since=`.
//
// Properties: no crash and no sanitizer report; a time that parses is not before 1970, and its
// canonical form (FormatTimeMillis) parses back to the same millisecond.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/time_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::optional<int64_t> ms = common::ParseUtcTime(text);
  if (!ms) return 0;
  if (*ms < 0) std::abort();
  const std::string canonical = common::FormatTimeMillis(*ms);
  std::optional<int64_t> again = common::ParseUtcTime(canonical);
  if (!again || *again != *ms) {
    std::fprintf(stderr, "'%s' -> %lld -> '%s' does not round-trip\n", text.c_str(),
                 static_cast<long long>(*ms), canonical.c_str());
    std::abort();
  }
  return 0;
}
