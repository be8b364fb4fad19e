#include "engine/train/step_stats.h"

#include <set>
#include <string>

#include <gtest/gtest.h>

namespace engine {
namespace {

StepStats Full() {
  StepStats s;
  s.step = 7;
  s.steps = 40;
  s.loss = 1.2345678901234567;
  s.lr = 3.3e-4;
  s.grad_norm = 0.87654;
  s.tokens_per_s = 12345.678;
  s.samples_per_s = 160.25;
  s.step_seconds = 0.0825;
  s.data_wait_seconds = 0.0005;
  s.forward_seconds = 0.025;
  s.backward_seconds = 0.05;
  s.allreduce_seconds = 0.001;
  s.optimizer_seconds = 0.0015;
  s.padding_ratio = 0.1875;
  s.packing_efficiency = 0.8125;
  s.world_size = 4;
  s.grad_wire_bytes = 123456789;
  s.grad_wire_bytes_fp32 = 493827156;
  fp8::Fp8Stats f;
  f.elements = 101047;
  f.amax = 0.75f;
  f.scale_min = 1.5e-5f;
  f.scale_max = 2.5e-3f;
  f.saturated = 2;
  f.underflowed = 31;
  f.nan = 0;
  s.fp8_allreduce = f;
  s.mfu = 0.0421;
  return s;
}

std::set<std::string> Keys(const nlohmann::json& j) {
  std::set<std::string> k;
  for (auto it = j.begin(); it != j.end(); ++it) k.insert(it.key());
  return k;
}

TEST(StepStatsTest, RoundTripsThroughItsOneJsonForm) {
  const StepStats s = Full();
  const nlohmann::json j = s.ToJson();
  EXPECT_EQ(j["type"], "step");
  auto back = StepStats::FromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->ToJson(), j);
  EXPECT_EQ(back->step, 7);
  EXPECT_EQ(back->loss, s.loss);  // exact: the event carries doubles in full
  EXPECT_EQ(back->world_size, 4);
  EXPECT_EQ(back->grad_wire_bytes, s.grad_wire_bytes);
  ASSERT_TRUE(back->fp8_allreduce.has_value());
  EXPECT_EQ(back->fp8_allreduce->underflowed, 31);
  EXPECT_EQ(back->fp8_allreduce->scale_min, 1.5e-5f);
  EXPECT_EQ(back->mfu, s.mfu);
  // The fields of the step event (docs/contracts.md), no more and no fewer.
  EXPECT_EQ(Keys(j), (std::set<std::string>{"type",
                                            "step",
                                            "steps",
                                            "loss",
                                            "lr",
                                            "grad_norm",
                                            "tokens_per_s",
                                            "samples_per_s",
                                            "step_seconds",
                                            "data_wait_seconds",
                                            "forward_seconds",
                                            "backward_seconds",
                                            "allreduce_seconds",
                                            "optimizer_seconds",
                                            "padding_ratio",
                                            "packing_efficiency",
                                            "world_size",
                                            "grad_wire_bytes",
                                            "grad_wire_bytes_fp32",
                                            "fp8_allreduce",
                                            "mfu"}));
}

TEST(StepStatsTest, OptionalFieldsOnlyWhenSet) {
  StepStats s = Full();
  s.grad_wire_bytes.reset();
  s.grad_wire_bytes_fp32.reset();
  s.fp8_allreduce.reset();
  s.mfu.reset();
  const nlohmann::json j = s.ToJson();
  for (const char* k : {"grad_wire_bytes", "grad_wire_bytes_fp32", "fp8_allreduce", "mfu"}) {
    EXPECT_FALSE(j.contains(k)) << k;
  }
  auto back = StepStats::FromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_FALSE(back->mfu.has_value());
  EXPECT_FALSE(back->fp8_allreduce.has_value());
  EXPECT_EQ(back->ToJson(), j);
}

// Evaluation during training adds its fields to the step event; a reader of steps skips them.
// A field the step must have is not guessed.
TEST(StepStatsTest, FromJsonIgnoresOtherFieldsAndRefusesMissingOnes) {
  nlohmann::json j = Full().ToJson();
  j["eval_success_rate"] = 0.5;
  EXPECT_TRUE(StepStats::FromJson(j).ok());

  nlohmann::json no_loss = j;
  no_loss.erase("loss");
  auto r = StepStats::FromJson(no_loss);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), common::Code::kInvalidArgument);
  EXPECT_EQ(r.status().field(), "loss");

  nlohmann::json text_mfu = j;
  text_mfu["mfu"] = "high";
  EXPECT_FALSE(StepStats::FromJson(text_mfu).ok());

  nlohmann::json bad_fp8 = j;
  bad_fp8["fp8_allreduce"].erase("amax");
  EXPECT_FALSE(StepStats::FromJson(bad_fp8).ok());

  nlohmann::json checkpoint = {{"type", "checkpoint"}, {"step", 7}};
  EXPECT_FALSE(StepStats::FromJson(checkpoint).ok());
}

TEST(StepStatsTest, ProgressLineShowsTheEventsFigures) {
  EXPECT_EQ(Full().ProgressLine(),
            "step 7/40 loss 1.2346 lr 3.30e-04 grad_norm 0.877 step 82.5 ms tokens/s 1.235e+04 "
            "samples/s 160 padding 18.8%");
}

}  // namespace
}  // namespace engine
