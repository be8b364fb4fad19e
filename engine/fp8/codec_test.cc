// The fp8 codecs: the scalar reference against the formats' definition, and every CPU path this
// machine has against the scalar one, bit for bit.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "engine/fp8/codec.h"
#include "engine/fp8/fp8_format.h"
#include "engine/fp8/testing/fp8_reference.h"

namespace engine::fp8 {
namespace {

using testing::NearestCode;
using testing::ReferenceValue;

constexpr Format kFormats[] = {Format::kE4M3, Format::kE5M2};

uint32_t BitsOf(float f) { return std::bit_cast<uint32_t>(f); }
float Pow2(int e) { return std::ldexp(1.0f, e); }

// Exact float equality that also calls two NaNs with the same bits equal.
::testing::AssertionResult SameBits(float a, float b) {
  if (BitsOf(a) == BitsOf(b)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << a << " (0x" << std::hex << BitsOf(a) << ") vs " << b << " (0x" << BitsOf(b) << ")";
}

TEST(Fp8ScalarTest, DecodesEveryCodeAsTheFormatDefines) {
  for (Format f : kFormats) {
    for (int c = 0; c < 256; ++c) {
      const uint8_t code = static_cast<uint8_t>(c);
      const double want = ReferenceValue(f, code);
      const float got = DecodeScalar(f, code);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << FormatName(f) << " code " << c;
        EXPECT_TRUE(IsNanCode(f, code));
        EXPECT_EQ(BitsOf(got), 0x7fc00000u | (c & 0x80 ? 0x80000000u : 0u));
      } else {
        EXPECT_FALSE(IsNanCode(f, code));
        EXPECT_EQ(static_cast<double>(got), want) << FormatName(f) << " code " << c;
        EXPECT_EQ(std::signbit(got), (c & 0x80) != 0) << c;
      }
    }
  }
  // The landmarks the formats are known by.
  EXPECT_EQ(DecodeScalar(Format::kE4M3, 0x7e), 448.0f);
  EXPECT_EQ(DecodeScalar(Format::kE4M3, 0x08), Pow2(-6));
  EXPECT_EQ(DecodeScalar(Format::kE4M3, 0x01), Pow2(-9));
  EXPECT_EQ(DecodeScalar(Format::kE5M2, 0x7b), 57344.0f);
  EXPECT_EQ(DecodeScalar(Format::kE5M2, 0x04), Pow2(-14));
  EXPECT_EQ(DecodeScalar(Format::kE5M2, 0x01), Pow2(-16));
  EXPECT_EQ(DecodeScalar(Format::kE5M2, 0x7c), std::numeric_limits<float>::infinity());
  EXPECT_EQ(DecodeScalar(Format::kE5M2, 0xfc), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(MaxFinite(Format::kE4M3), DecodeScalar(Format::kE4M3, MaxFiniteCode(Format::kE4M3)));
  EXPECT_EQ(MaxFinite(Format::kE5M2), DecodeScalar(Format::kE5M2, MaxFiniteCode(Format::kE5M2)));
}

TEST(Fp8ScalarTest, EncodeOfDecodeReturnsTheCode) {
  for (Format f : kFormats) {
    for (int c = 0; c < 256; ++c) {
      const uint8_t code = static_cast<uint8_t>(c);
      const uint8_t back = EncodeScalar(f, DecodeScalar(f, code));
      if (IsNanCode(f, code)) {
        EXPECT_EQ(back, (code & 0x80) | kNanCode) << c;  // payloads are not kept
      } else if (f == Format::kE5M2 && (code & 0x7f) == 0x7c) {
        EXPECT_EQ(back, (code & 0x80) | 0x7b) << c;  // ±inf saturates (satfinite)
      } else {
        EXPECT_EQ(back, code) << FormatName(f) << " code " << c;  // -0 (0x80) included
      }
    }
  }
}

TEST(Fp8ScalarTest, TiesRoundToEvenAtEveryExponent) {
  // Named cases first: E4M3 around 1 and 16, E5M2 around 1.
  EXPECT_EQ(EncodeScalar(Format::kE4M3, 1.0625f), 0x38);  // 1 | 1.125 → 1 (even)
  EXPECT_EQ(EncodeScalar(Format::kE4M3, 1.1875f), 0x3a);  // 1.125 | 1.25 → 1.25 (even)
  EXPECT_EQ(EncodeScalar(Format::kE4M3, 17.0f), 0x58);    // 16 | 18 → 16
  EXPECT_EQ(EncodeScalar(Format::kE4M3, 19.0f), 0x5a);    // 18 | 20 → 20
  EXPECT_EQ(EncodeScalar(Format::kE4M3, -19.0f), 0xda);
  EXPECT_EQ(EncodeScalar(Format::kE4M3, 248.0f), 0x78);  // 240 | 256 → 256: carry into exponent
  EXPECT_EQ(EncodeScalar(Format::kE5M2, 1.125f), 0x3c);  // 1 | 1.25 → 1
  EXPECT_EQ(EncodeScalar(Format::kE5M2, 1.375f), 0x3e);  // 1.25 | 1.5 → 1.5
  // Then every pair of neighbouring finite codes: the midpoint goes to the even code, one float
  // ulp either side goes to the nearer one.
  for (Format f : kFormats) {
    for (int c = 0; c < MaxFiniteCode(f); ++c) {
      const float lo = DecodeScalar(f, static_cast<uint8_t>(c));
      const float hi = DecodeScalar(f, static_cast<uint8_t>(c + 1));
      const float mid = (lo + hi) / 2;  // exact: one more mantissa bit than the format has
      ASSERT_EQ(static_cast<double>(mid), (static_cast<double>(lo) + hi) / 2);
      const int even = (c & 1) == 0 ? c : c + 1;
      EXPECT_EQ(EncodeScalar(f, mid), even) << FormatName(f) << " between " << c << "," << c + 1;
      EXPECT_EQ(EncodeScalar(f, -mid), 0x80 | even);
      EXPECT_EQ(EncodeScalar(f, std::nextafter(mid, 0.0f)), c);
      EXPECT_EQ(EncodeScalar(f, std::nextafter(mid, 1e9f)), c + 1);
    }
  }
}

TEST(Fp8ScalarTest, Subnormals) {
  // E4M3: step 2^-9, largest subnormal 7·2^-9, smallest normal 2^-6 = 8·2^-9.
  EXPECT_EQ(EncodeScalar(Format::kE4M3, Pow2(-9)), 0x01);
  EXPECT_EQ(EncodeScalar(Format::kE4M3, 7 * Pow2(-9)), 0x07);
  EXPECT_EQ(EncodeScalar(Format::kE4M3, Pow2(-10)), 0x00);  // halfway to 0: even is 0
  EXPECT_EQ(EncodeScalar(Format::kE4M3, std::nextafter(Pow2(-10), 1.0f)), 0x01);
  EXPECT_EQ(EncodeScalar(Format::kE4M3, 1.5f * Pow2(-9)), 0x02);  // 1 | 2 → 2
  EXPECT_EQ(EncodeScalar(Format::kE4M3, 2.5f * Pow2(-9)), 0x02);  // 2 | 3 → 2
  EXPECT_EQ(EncodeScalar(Format::kE4M3, 7.5f * Pow2(-9)), 0x08);  // into the normals
  EXPECT_EQ(EncodeScalar(Format::kE4M3, -Pow2(-10)), 0x80);
  EXPECT_EQ(EncodeScalar(Format::kE4M3, 1e-30f), 0x00);
  EXPECT_EQ(EncodeScalar(Format::kE4M3, std::numeric_limits<float>::denorm_min()), 0x00);
  // E5M2: step 2^-16, smallest normal 2^-14 = 4·2^-16.
  EXPECT_EQ(EncodeScalar(Format::kE5M2, Pow2(-16)), 0x01);
  EXPECT_EQ(EncodeScalar(Format::kE5M2, 3 * Pow2(-16)), 0x03);
  EXPECT_EQ(EncodeScalar(Format::kE5M2, Pow2(-17)), 0x00);
  EXPECT_EQ(EncodeScalar(Format::kE5M2, std::nextafter(Pow2(-17), 1.0f)), 0x01);
  EXPECT_EQ(EncodeScalar(Format::kE5M2, 3.5f * Pow2(-16)), 0x04);
  EXPECT_EQ(EncodeScalar(Format::kE5M2, -3 * Pow2(-16)), 0x83);
}

TEST(Fp8ScalarTest, SaturatesNanAndZeros) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float snan = std::numeric_limits<float>::signaling_NaN();
  for (float v : {448.0f, 449.0f, 464.0f, 465.0f, 480.0f, 1e6f, 3.4e38f, inf}) {
    EXPECT_EQ(EncodeScalar(Format::kE4M3, v), 0x7e) << v;
    EXPECT_EQ(EncodeScalar(Format::kE4M3, -v), 0xfe) << v;
  }
  for (float v : {57344.0f, 61440.0f, 65536.0f, 1e10f, inf}) {
    EXPECT_EQ(EncodeScalar(Format::kE5M2, v), 0x7b) << v;
    EXPECT_EQ(EncodeScalar(Format::kE5M2, -v), 0xfb) << v;
  }
  for (Format f : kFormats) {
    EXPECT_EQ(EncodeScalar(f, nan), 0x7f);
    EXPECT_EQ(EncodeScalar(f, -nan), 0xff);
    EXPECT_EQ(EncodeScalar(f, snan), 0x7f);
    EXPECT_EQ(EncodeScalar(f, 0.0f), 0x00);
    EXPECT_EQ(EncodeScalar(f, -0.0f), 0x80);
    EXPECT_EQ(EncodeScalar(f, -1e-30f), 0x80);
  }
}

class Fp8PathTest : public ::testing::TestWithParam<cpu::CpuPath> {};

// Floats that exercise everything: random bits near the formats' ranges (where rounding,
// subnormals and saturation happen), fully random bits (NaN, inf, huge, tiny), and exact ties.
std::vector<float> MixedFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t r = rng();
    switch (i % 4) {
      case 0:
      case 1: {
        // Exponent in [2^-20, 2^17): covers both formats' subnormals through past their max.
        const uint32_t e = 107 + (r >> 24) % 37;
        out[i] = std::bit_cast<float>((r & 0x807fffffu) | (e << 23));
        break;
      }
      case 2:
        out[i] = std::bit_cast<float>(r);
        break;
      default: {
        // Keep only the top 4 mantissa bits: many exact ties for both formats.
        const uint32_t e = 107 + (r >> 24) % 37;
        out[i] = std::bit_cast<float>((r & 0x80780000u) | (e << 23));
        break;
      }
    }
  }
  return out;
}

TEST_P(Fp8PathTest, EncodesRandomFloatsAsTheNearestSearchDoes) {
  const cpu::CpuPath path = GetParam();
  // Odd length: the vector paths' tails run too.
  const std::vector<float> in = MixedFloats(2'000'003, 7);
  std::vector<uint8_t> got(in.size()), scalar(in.size());
  for (Format f : kFormats) {
    EncodeCounts c_path, c_scalar;
    EncodeFp8(f, in.data(), in.size(), got.data(), 1.0f, &c_path, path);
    EncodeFp8(f, in.data(), in.size(), scalar.data(), 1.0f, &c_scalar, cpu::CpuPath::kScalar);
    size_t mismatches = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      const uint8_t want = NearestCode(f, in[i]);
      if (got[i] != want || scalar[i] != want) {
        if (++mismatches <= 5) {
          ADD_FAILURE() << FormatName(f) << " " << cpu::CpuPathName(path) << ": x=" << in[i]
                        << " (0x" << std::hex << BitsOf(in[i]) << ") got 0x" << int(got[i])
                        << " scalar 0x" << int(scalar[i]) << " want 0x" << int(want);
        }
      }
    }
    EXPECT_EQ(mismatches, 0u);
    EXPECT_EQ(c_path.saturated, c_scalar.saturated);
    EXPECT_EQ(c_path.underflowed, c_scalar.underflowed);
    EXPECT_EQ(c_path.nan, c_scalar.nan);
    EXPECT_GT(c_path.saturated, 0);
    EXPECT_GT(c_path.underflowed, 0);
    EXPECT_GT(c_path.nan, 0);
  }
}

TEST_P(Fp8PathTest, DecodesEveryCodeLikeTheScalarPath) {
  const cpu::CpuPath path = GetParam();
  // Every code, several times at different offsets and lengths, so tails and lanes all see each.
  std::vector<uint8_t> codes;
  for (int rep = 0; rep < 3; ++rep) {
    for (int c = 0; c < 256; ++c) codes.push_back(static_cast<uint8_t>((c * 37 + rep) & 0xff));
  }
  for (Format f : kFormats) {
    for (float scale : {1.0f, 0.0078125f, 3.1e-3f, 1234.5f}) {
      for (size_t n : {codes.size(), codes.size() - 5, size_t{7}, size_t{1}}) {
        std::vector<float> got(n), want(n);
        DecodeFp8(f, codes.data(), n, got.data(), scale, path);
        DecodeFp8(f, codes.data(), n, want.data(), scale, cpu::CpuPath::kScalar);
        for (size_t i = 0; i < n; ++i) {
          ASSERT_TRUE(SameBits(got[i], want[i]))
              << FormatName(f) << " " << cpu::CpuPathName(path) << " code " << int(codes[i]);
          if (!IsNanCode(f, codes[i])) {
            ASSERT_EQ(want[i], DecodeScalar(f, codes[i]) * scale);
          }
        }
      }
    }
  }
}

TEST_P(Fp8PathTest, AllCodesRoundTripOnThePath) {
  const cpu::CpuPath path = GetParam();
  std::vector<uint8_t> codes(256), back(256);
  for (int c = 0; c < 256; ++c) codes[c] = static_cast<uint8_t>(c);
  std::vector<float> values(256);
  for (Format f : kFormats) {
    DecodeFp8(f, codes.data(), 256, values.data(), 1.0f, path);
    EncodeFp8(f, values.data(), 256, back.data(), 1.0f, nullptr, path);
    for (int c = 0; c < 256; ++c) {
      uint8_t want = static_cast<uint8_t>(c);
      if (IsNanCode(f, want)) want = (want & 0x80) | kNanCode;
      if (f == Format::kE5M2 && (c & 0x7f) == 0x7c) want = (want & 0x80) | 0x7b;
      EXPECT_EQ(back[c], want) << FormatName(f) << " " << cpu::CpuPathName(path) << " code " << c;
    }
  }
}

TEST_P(Fp8PathTest, CountsSaturatedUnderflowedAndNan) {
  const cpu::CpuPath path = GetParam();
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // E4M3 with inv_scale 2: 230 → 460 (rounds to 448 anyway: not saturated), 240 → 480
  // (saturated), inf (saturated), 2e-4 → 4e-4 < 2^-10 (underflowed), ±0 (not underflowed).
  const std::vector<float> in = {0.0f, -0.0f, 1.0f,   230.0f, 240.0f, inf,    -inf,
                                 nan,  2e-4f, -2e-4f, 3e-3f,  17.0f,  -300.0f};
  std::vector<uint8_t> out(in.size());
  EncodeCounts c;
  EncodeFp8(Format::kE4M3, in.data(), in.size(), out.data(), 2.0f, &c, path);
  EXPECT_EQ(c.saturated, 4);  // 480, +inf, -inf, -600
  EXPECT_EQ(c.underflowed, 2);
  EXPECT_EQ(c.nan, 1);
  EXPECT_EQ(out[3], 0x7e);
  EXPECT_EQ(out[4], 0x7e);
  EXPECT_EQ(out[8], 0x00);
  EXPECT_EQ(out[9], 0x80);
  // Counts add up across calls.
  EncodeFp8(Format::kE4M3, in.data(), in.size(), out.data(), 2.0f, &c, path);
  EXPECT_EQ(c.saturated, 8);
}

TEST_P(Fp8PathTest, FiniteAmaxSkipsNanAndInf) {
  const cpu::CpuPath path = GetParam();
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-5.0f, 5.0f);
  for (size_t n : {size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{1000}, size_t{1031}}) {
    std::vector<float> v(n);
    float want = 0;
    for (size_t i = 0; i < n; ++i) {
      v[i] = u(rng);
      want = std::max(want, std::fabs(v[i]));
    }
    if (n > 3) {
      v[1] = nan;
      v[2] = -inf;
      v[n - 1] = -7.5f;
      want = 7.5f;
    }
    if (n == 1) want = std::fabs(v[0]);
    EXPECT_EQ(FiniteAmax(v.data(), n, path), want) << n;
  }
  const std::vector<float> none = {nan, inf, -inf};
  EXPECT_EQ(FiniteAmax(none.data(), none.size(), path), 0.0f);
}

INSTANTIATE_TEST_SUITE_P(Paths, Fp8PathTest, ::testing::ValuesIn(cpu::SupportedCpuPaths()),
                         [](const auto& info) { return testing::PathTestName(info.param); });

}  // namespace
}  // namespace engine::fp8
