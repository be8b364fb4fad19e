// Random names and tokens from the kernel's random source (getrandom), and the hex they are
// written in. Free of OpenSSL, so it is part of embody_common_base (common/CMakeLists.txt).
#pragma once

#include <cstddef>
#include <string>

namespace common {

// `n` bytes as 2n lower-case hex digits.
std::string HexOf(const unsigned char* p, size_t n);
// `bytes` random bytes from getrandom(2), hex-encoded. Aborts if the kernel has none to give.
std::string RandomHex(size_t bytes);

}  // namespace common
