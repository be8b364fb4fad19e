// Secrets: random tokens and their SHA-256 digests. Tokens are 256-bit random values written as
// 64 hex characters; only their digests are ever stored.
#pragma once

#include <string>

namespace common {

// 32 random bytes from the OS, hex-encoded. Aborts if the OS has no randomness to give.
std::string RandomToken();
// Lower-case hex SHA-256 of `data`.
std::string Sha256Hex(const std::string& data);
// Compares two strings in time independent of where they differ.
bool ConstantTimeEquals(const std::string& a, const std::string& b);

}  // namespace common
