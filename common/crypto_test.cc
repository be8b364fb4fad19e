#include "common/crypto.h"
#include "common/random_hex.h"

#include <gtest/gtest.h>

namespace common {
namespace {

TEST(CryptoTest, Sha256KnownAnswer) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(CryptoTest, StreamingSha256MatchesOneShot) {
  std::string data(100000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 31);
  Sha256 h;
  h.Update(data.data(), 7);
  h.Update(data.data() + 7, data.size() - 7);
  EXPECT_EQ(h.FinalHex(), Sha256Hex(data));
}

TEST(CryptoTest, TokensAreRandomAndLongEnough) {
  std::string a = RandomToken(), b = RandomToken();
  EXPECT_EQ(a.size(), 64u);
  EXPECT_NE(a, b);
}

TEST(CryptoTest, HexAndRandomHexFromTheKernel) {
  const unsigned char bytes[] = {0x00, 0x0f, 0xa5, 0xff};
  EXPECT_EQ(HexOf(bytes, sizeof bytes), "000fa5ff");
  EXPECT_EQ(HexOf(bytes, 0), "");
  const std::string a = RandomHex(8), b = RandomHex(8);
  EXPECT_EQ(a.size(), 16u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos) << a;
  EXPECT_NE(a, b);
  EXPECT_EQ(RandomHex(0), "");
}

TEST(CryptoTest, ConstantTimeEquals) {
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "ab"));
}

}  // namespace
}  // namespace common
