// Strict decimal integers from text that came from outside the process: query parameters, path
// segments, cursors, flags, file names, headers.
//
// Accepted: an optional '-' followed by 1-19 ASCII digits, nothing else. Refused with
// invalid_argument: "", "+1", " 1", "1 ", "0x10", "1e3", "1.0", a value outside [min, max]
// (overflow of int64 included). std::stoll and strtol skip leading blanks, take a '+', read "0x"
// as 0 and stop at the first non-digit, which is how "12abc" used to pass as 12 wherever the
// caller forgot the "used == size" check.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "common/status.h"

namespace common {

// `field` names the input in the Status ("limit", "--slots"); the message says what was wrong
// and what was expected.
Result<int64_t> ParseInt64(std::string_view text,
                           int64_t min = std::numeric_limits<int64_t>::min(),
                           int64_t max = std::numeric_limits<int64_t>::max(),
                           const std::string& field = "");

// The same for an int-sized range, so callers need no cast.
Result<int> ParseInt(std::string_view text, int min, int max, const std::string& field = "");

}  // namespace common
