// Secrets: random tokens and their SHA-256 digests. Tokens are 256-bit random values written as
// 64 hex characters; only their digests are ever stored.
#pragma once

#include <cstddef>
#include <string>

namespace common {

// 32 random bytes from the kernel (common::RandomHex), hex-encoded. Aborts if it has none to give.
std::string RandomToken();
// Lower-case hex SHA-256 of `data`.
std::string Sha256Hex(const std::string& data);
// SHA-256 of data given in pieces (a file too large to hold in memory).
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void Update(const void* data, size_t n);
  std::string FinalHex();  // lower-case hex; call once

 private:
  void* ctx_;  // EVP_MD_CTX
};

// Compares two strings in time independent of where they differ.
bool ConstantTimeEquals(const std::string& a, const std::string& b);

}  // namespace common
