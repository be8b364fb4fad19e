#include "agent/node/job_series.h"

#include <gtest/gtest.h>

namespace agent {
namespace {

std::string Name(std::string_view field) {
  auto n = NameJobSeries(field);
  return n ? n->name : "<refused>";
}

TEST(JobSeriesTest, KnownFieldsGetConventionalNames) {
  EXPECT_EQ(Name("tokens_per_s"), "embody_job_tokens_per_second");
  EXPECT_EQ(Name("samples_per_s"), "embody_job_samples_per_second");
  EXPECT_EQ(Name("step_seconds"), "embody_job_step_seconds");
  EXPECT_EQ(Name("data_wait_seconds"), "embody_job_data_wait_seconds");
  EXPECT_EQ(Name("loss"), "embody_job_loss");
  EXPECT_EQ(Name("grad_norm"), "embody_job_grad_norm");
  EXPECT_EQ(Name("lr"), "embody_job_learning_rate");
  EXPECT_EQ(Name("padding_ratio"), "embody_job_padding_ratio");
  EXPECT_EQ(Name("packing_efficiency"), "embody_job_packing_efficiency_ratio");
  EXPECT_EQ(Name("mfu"), "embody_job_mfu_ratio");
  EXPECT_EQ(Name("step"), "embody_job_step");
  EXPECT_EQ(Name("steps"), "embody_job_target_steps");
}

TEST(JobSeriesTest, UnitSuffixesBecomeBaseUnits) {
  auto ms = NameJobSeries("forward_ms");
  ASSERT_TRUE(ms);
  EXPECT_EQ(ms->name, "embody_job_forward_seconds");
  EXPECT_DOUBLE_EQ(ms->scale, 1e-3);
  EXPECT_EQ(Name("backward_s"), "embody_job_backward_seconds");
  EXPECT_EQ(Name("comm_sec"), "embody_job_comm_seconds");
  EXPECT_EQ(Name("frames_per_s"), "embody_job_frames_per_second");
  auto pct = NameJobSeries("gpu_busy_percent");
  ASSERT_TRUE(pct);
  EXPECT_EQ(pct->name, "embody_job_gpu_busy_ratio");
  EXPECT_DOUBLE_EQ(pct->scale, 0.01);
  EXPECT_DOUBLE_EQ(NameJobSeries("loss")->scale, 1.0);
}

TEST(JobSeriesTest, SanitisesAndRefuses) {
  EXPECT_EQ(Name("Reward/Mean"), "embody_job_reward_mean");
  EXPECT_EQ(Name("  eval--success rate!! "), "embody_job_eval_success_rate");
  EXPECT_EQ(Name("1st"), "embody_job_1st");
  EXPECT_EQ(Name("état"), "embody_job_tat");  // non-ASCII bytes are separators
  EXPECT_EQ(Name(""), "<refused>");
  EXPECT_EQ(Name("///"), "<refused>");
  EXPECT_EQ(Name(std::string(kMaxFieldLength + 1, 'a')), "<refused>");
  EXPECT_EQ(Name(std::string(kMaxFieldLength, 'a')),
            "embody_job_" + std::string(kMaxFieldLength, 'a'));
  // The agent's own names cannot be shadowed by a job.
  EXPECT_EQ(Name("steps_total"), "<refused>");
  EXPECT_EQ(Name("process_cpu_seconds_total"), "<refused>");
  EXPECT_EQ(Name("process_resident_memory_bytes"), "<refused>");
}

TEST(JobSeriesTest, HelpTexts) {
  EXPECT_NE(JobSeriesHelp("embody_job_loss"), JobSeriesHelp("embody_job_whatever"));
  EXPECT_FALSE(JobSeriesHelp("embody_job_whatever").empty());
}

}  // namespace
}  // namespace agent
