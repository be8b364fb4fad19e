#include "common/crypto.h"

#include <gtest/gtest.h>

namespace common {
namespace {

TEST(CryptoTest, Sha256KnownAnswer) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(CryptoTest, TokensAreRandomAndLongEnough) {
  std::string a = RandomToken(), b = RandomToken();
  EXPECT_EQ(a.size(), 64u);
  EXPECT_NE(a, b);
}

TEST(CryptoTest, ConstantTimeEquals) {
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "ab"));
}

}  // namespace
}  // namespace common
