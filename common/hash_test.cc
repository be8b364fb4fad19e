#include "common/hash.h"

#include <gtest/gtest.h>

#include <string>

#include "common/rng.h"

namespace common {
namespace {

// SplitMix64's published outputs: seed 0 (as in Vigna's splitmix64.c) and seed 1234567 (the
// vector the xoshiro reference tests and Java's SplittableRandom agree on).
TEST(SplitMix64Test, MatchesReferenceStreams) {
  struct Case {
    uint64_t seed;
    uint64_t want[5];
  } cases[] = {{0,
                {0xe220a8397b1dcdafULL, 0x6e789e6aa1b965f4ULL, 0x06c45d188009454fULL,
                 0xf88bb8a8724c81ecULL, 0x1b39896a51a8749bULL}},
               {1234567,
                {6457827717110365317ULL, 3203168211198807973ULL, 9817491932198370423ULL,
                 4593380528125082431ULL, 16408922859458223821ULL}}};
  for (const auto& c : cases) {
    uint64_t state = c.seed;
    Rng rng(c.seed);
    for (uint64_t want : c.want) {
      EXPECT_EQ(SplitMix64Next(state), want) << "seed " << c.seed;
      EXPECT_EQ(rng.NextU64(), want) << "seed " << c.seed;
    }
  }
}

TEST(SplitMix64Test, StatelessFormIsTheFirstOutput) {
  for (uint64_t seed : {0ULL, 1ULL, 1234567ULL, ~0ULL}) {
    uint64_t state = seed;
    EXPECT_EQ(SplitMix64(seed), SplitMix64Next(state));
    EXPECT_EQ(SplitMix64(seed), SplitMix64Mix(seed + kSplitMix64Gamma));
  }
  EXPECT_EQ(SplitMix64Mix(0), 0u);  // the finaliser alone fixes zero; the gamma is what moves it
  static_assert(SplitMix64(0) == 0xe220a8397b1dcdafULL, "usable in constant expressions");
}

// The FNV-1a 64 vectors of the authors' test suite (isthe.com/chongo/tech/comp/fnv).
TEST(Fnv1a64Test, MatchesReferenceVectors) {
  EXPECT_EQ(Fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(Fnv1a64("foobar"), 0x85944171f73967e8ULL);
}

TEST(Fnv1a64Test, ChainsOverBuffersAndSeesEveryByte) {
  const std::string text = "foobar";
  EXPECT_EQ(Fnv1a64("bar", Fnv1a64("foo")), Fnv1a64(text));
  EXPECT_EQ(Fnv1a64Bytes(text.data(), text.size()), Fnv1a64(text));
  EXPECT_EQ(Fnv1a64Bytes("bar", 3, Fnv1a64("foo")), Fnv1a64(text));
  const std::string with_nul("a\0b", 3);
  EXPECT_NE(Fnv1a64(with_nul), Fnv1a64("ab"));
  const unsigned char high[] = {0xff, 0x80};  // bytes above 0x7f hash as unsigned
  EXPECT_EQ(Fnv1a64Bytes(high, 2),
            ((kFnv1a64Basis ^ 0xffu) * kFnv1a64Prime ^ 0x80u) * kFnv1a64Prime);
}

}  // namespace
}  // namespace common
