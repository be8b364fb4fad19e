#include "engine/cpu/cpu_path.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include <optional>

#include <gtest/gtest.h>

namespace engine::cpu {
namespace {

TEST(CpuPathTest, NamesRoundTrip) {
  for (CpuPath p : {CpuPath::kScalar, CpuPath::kAvx2, CpuPath::kAvx512}) {
    EXPECT_EQ(ParseCpuPath(CpuPathName(p)), p);
  }
  EXPECT_FALSE(ParseCpuPath("avx").has_value());
  EXPECT_FALSE(ParseCpuPath("").has_value());
}

TEST(CpuPathTest, ScalarAlwaysSupportedAndListedFirst) {
  const auto paths = SupportedCpuPaths();
  ASSERT_FALSE(paths.empty());
  EXPECT_EQ(paths.front(), CpuPath::kScalar);
  // AVX-512 is only used on top of AVX2.
  if (CpuSupports(CpuPath::kAvx512)) {
    EXPECT_TRUE(CpuSupports(CpuPath::kAvx2));
  }
  std::printf("paths on this machine:");
  for (CpuPath p : paths) std::printf(" %s", CpuPathName(p));
  std::printf("; active: %s\n", ActiveCpuPathName());
}

TEST(CpuPathTest, ChoiceFollowsTheVariableWhenTheCpuHasIt) {
  const CpuPath best = SupportedCpuPaths().back();
  std::string warning;
  EXPECT_EQ(ChooseCpuPath(nullptr, &warning), best);
  EXPECT_EQ(ChooseCpuPath("", &warning), best);
  EXPECT_TRUE(warning.empty());
  for (CpuPath p : SupportedCpuPaths()) {
    EXPECT_EQ(ChooseCpuPath(CpuPathName(p), &warning), p);
    EXPECT_TRUE(warning.empty()) << warning;
  }
  EXPECT_EQ(ChooseCpuPath("sse9", &warning), best);
  EXPECT_NE(warning.find("sse9"), std::string::npos);
  if (!CpuSupports(CpuPath::kAvx512)) {
    warning.clear();
    EXPECT_EQ(ChooseCpuPath("avx512", &warning), best);
    EXPECT_FALSE(warning.empty());
  }
}

TEST(CpuPathTest, ActivePathIsStableAndSupported) {
  const CpuPath p = ActiveCpuPath();
  EXPECT_TRUE(CpuSupports(p));
  EXPECT_EQ(ActiveCpuPath(), p);
  EXPECT_STREQ(ActiveCpuPathName(), CpuPathName(p));
}

// ctest runs this binary once more under each EMBODY_CPU_PATH (engine/cpu/CMakeLists.txt).
TEST(CpuPathTest, ActivePathHonoursTheVariable) {
  const char* forced = std::getenv("EMBODY_CPU_PATH");
  if (forced == nullptr) GTEST_SKIP() << "EMBODY_CPU_PATH not set";
  EXPECT_EQ(ActiveCpuPath(), ChooseCpuPath(forced, nullptr));
  if (std::string(forced) == "scalar") {
    EXPECT_EQ(ActiveCpuPath(), CpuPath::kScalar);
  }
  // avx512 runs without the AVX512_BF16 products, avx512_bf16 with them (where it runs at all).
  if (std::string(forced) == "avx512") EXPECT_FALSE(Avx512Bf16Enabled());
  if (std::string(forced) == "avx512_bf16" && CpuPathRunsHere("avx512_bf16")) {
    EXPECT_EQ(ActiveCpuPath(), CpuPath::kAvx512);
    EXPECT_TRUE(Avx512Bf16Enabled());
  }
}

TEST(CpuPathTest, EveryPathNameSaysWhetherItRunsHere) {
  EXPECT_TRUE(CpuPathRunsHere("scalar"));
  EXPECT_EQ(CpuPathRunsHere("avx2"), CpuSupports(CpuPath::kAvx2));
  EXPECT_EQ(CpuPathRunsHere("avx512"), CpuSupports(CpuPath::kAvx512));
  EXPECT_EQ(CpuPathRunsHere("avx512_bf16"), CpuSupportsAvx512Bf16());
  EXPECT_FALSE(CpuPathRunsHere("sse9"));
  EXPECT_FALSE(CpuPathRunsHere(""));
  EXPECT_EQ(ParseCpuPath("avx512_bf16"), std::optional<CpuPath>(CpuPath::kAvx512));
  if (!CpuSupportsAvx512Bf16()) {
    std::string warning;
    EXPECT_EQ(ChooseCpuPath("avx512_bf16", &warning), SupportedCpuPaths().back());
    EXPECT_FALSE(warning.empty());
  }
}

}  // namespace
}  // namespace engine::cpu
