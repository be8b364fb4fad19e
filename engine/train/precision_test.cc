// engine.precision: the choice on CPUs with and without native bf16, the job's event, and a short
// training run in bf16 whose loss curve tracks fp32's on the same seed and samples.
#include "engine/testing/small_run.h"
#include "engine/train/precision.h"

#include <cmath>
#include <numeric>

#include <gtest/gtest.h>

#include "api/job_event_check.h"
#include "engine/report/recording_sink.h"
#include "engine/train/trainer.h"

namespace engine {
namespace {

TEST(PrecisionTest, Fp32RunsTheFp32Compute) {
  for (bool bf16 : {false, true}) {
    const PrecisionChoice c = ChoosePrecision("fp32", bf16, LinearCompute::kOnednnFp32);
    EXPECT_EQ(c.used, "fp32");
    EXPECT_EQ(c.compute, LinearCompute::kOnednnFp32);
    EXPECT_TRUE(c.warning.empty());
  }
}

TEST(PrecisionTest, Bf16RunsBf16WhereTheCpuHasIt) {
  const PrecisionChoice c = ChoosePrecision("bf16", true, LinearCompute::kEigenFp32);
  EXPECT_EQ(c.used, "bf16");
  EXPECT_EQ(c.compute, LinearCompute::kOnednnBf16);
  EXPECT_TRUE(c.warning.empty());
  const nlohmann::json ev = PrecisionEvent(c);
  EXPECT_EQ(ev["type"], "precision");
  EXPECT_EQ(ev["used"], "bf16");
  EXPECT_EQ(ev["gemm"], "onednn-bf16");
  EXPECT_FALSE(ev.contains("warning"));
}

TEST(PrecisionTest, Bf16FallsBackToFp32WithAWarningEvent) {
  const PrecisionChoice c = ChoosePrecision("bf16", false, LinearCompute::kEigenFp32);
  EXPECT_EQ(c.requested, "bf16");
  EXPECT_EQ(c.used, "fp32");
  EXPECT_EQ(c.compute, LinearCompute::kEigenFp32);
  EXPECT_NE(c.warning.find("AVX512_BF16"), std::string::npos) << c.warning;
  const nlohmann::json ev = PrecisionEvent(c);
  EXPECT_EQ(ev["requested"], "bf16");
  EXPECT_EQ(ev["used"], "fp32");
  EXPECT_EQ(ev["gemm"], "eigen-fp32");
  EXPECT_EQ(ev["warning"], c.warning);
  // The agent's job-local API takes it as it is.
  EXPECT_FALSE(api::CheckJobEvent("precision", ev).has_value());
}

// The reference model's layer widths scaled down (two packed rows of 512 tokens per step), so
// every product is big enough to run oneDNN's blocked kernels.
TrainerOptions RunOptions(const std::string& precision, int steps) {
  TrainerOptions o = testing::SmallRun(steps, /*seed=*/3);
  o.engine.model.d_model = 64;
  o.engine.model.mlp = 256;
  o.engine.precision = precision;
  return o;
}

using testing::Mean;

TEST(PrecisionTest, Bf16TrainingTracksFp32) {
  if (!Bf16ComputeSupported()) GTEST_SKIP() << "no AVX512_BF16 or AMX on this CPU";
  constexpr int kSteps = 120;
  LocalCommunicator comm;
  auto fp32 = Train(RunOptions("fp32", kSteps), comm, nullptr);
  ASSERT_TRUE(fp32.ok()) << fp32.status().ToString();
  RecordingSink sink;
  auto bf16 = Train(RunOptions("bf16", kSteps), comm, &sink);
  ASSERT_TRUE(bf16.ok()) << bf16.status().ToString();
  SetLinearCompute(DefaultFp32Compute());  // the process's other tests run fp32

  const auto events = sink.events();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.front()["type"], "precision");
  EXPECT_EQ(events.front()["used"], "bf16");

  ASSERT_EQ(fp32->losses.size(), size_t{kSteps});
  ASSERT_EQ(bf16->losses.size(), size_t{kSteps});
  // Step 1 sees the same weights and samples: only the products' rounding differs.
  EXPECT_NEAR(bf16->losses[0], fp32->losses[0], 0.01 * fp32->losses[0]);
  EXPECT_NE(bf16->losses[0], fp32->losses[0]) << "bf16 ran the fp32 products";
  // The curves: every 20-step window's mean within 3%, the last 40 steps' within 1% (the
  // engine's goal for bf16; measured: -0.66% and +0.81% over steps 81-100 and 101-120, the
  // step-to-step noise of a 13-sample batch, about +0.1% over the 40).
  for (int w = 0; w < kSteps; w += 20) {
    const double a = Mean(fp32->losses, w, w + 20), b = Mean(bf16->losses, w, w + 20);
    std::printf("steps %3d-%3d: fp32 %.5f bf16 %.5f (%+.2f%%)\n", w + 1, w + 20, a, b,
                100.0 * (b - a) / a);
    EXPECT_NEAR(b, a, 0.03 * a) << "window from step " << w + 1;
  }
  const double last_fp32 = Mean(fp32->losses, kSteps - 40, kSteps);
  const double last_bf16 = Mean(bf16->losses, kSteps - 40, kSteps);
  EXPECT_NEAR(last_bf16, last_fp32, 0.01 * last_fp32);
  EXPECT_LT(Mean(bf16->losses, kSteps - 20, kSteps), 0.7 * Mean(bf16->losses, 0, 20));
}

}  // namespace
}  // namespace engine
