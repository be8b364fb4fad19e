#include "agent/node/agent_metrics.h"

#include <gtest/gtest.h>

#include "agent/node/metric_families.h"
#include "agent/testing/test_util.h"

namespace agent {
namespace {

using nlohmann::json;

// Sample lines of a text exposition (neither comments nor blank).
size_t Samples(const std::string& text) {
  size_t n = 0, at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    if (end > at && text[at] != '#') ++n;
    at = end + 1;
  }
  return n;
}

TEST(AgentMetricsTest, EveryNumericStepFieldBecomesAJobGauge) {
  AgentMetrics m;
  m.ObserveStep(3, "acme",
                json{{"type", "step"},
                     {"step", 12},
                     {"steps", 100},
                     {"loss", 0.75},
                     {"tokens_per_s", 5000},
                     {"samples_per_s", 40},
                     {"step_seconds", 0.25},
                     {"data_wait_seconds", 0.01},
                     {"forward_seconds", 0.08},
                     {"backward_seconds", 0.12},
                     {"comm_seconds", 0.03},
                     {"optimizer_seconds", 0.01},
                     {"grad_norm", 1.5},
                     {"lr", 0.0003},
                     {"padding_ratio", 0.125},
                     {"packing_efficiency", 0.875},
                     {"mfu", 0.42},
                     {"optimizer_ms", 10},
                     {"reward_mean", -2},
                     {"note", "text is not a series"},
                     {"ok", true},
                     {"phases", {{"x", 1}}}});
  std::string text = m.SerializeJob(3);
  // No label names the job or its tenant: discovery assigns them (agent_metrics.h).
  const std::string l = " ";
  for (const std::string& line :
       {"embody_job_step" + l + "12", "embody_job_target_steps" + l + "100",
        "embody_job_loss" + l + "0.75", "embody_job_tokens_per_second" + l + "5000",
        "embody_job_samples_per_second" + l + "40", "embody_job_step_seconds" + l + "0.25",
        "embody_job_data_wait_seconds" + l + "0.01", "embody_job_forward_seconds" + l + "0.08",
        "embody_job_backward_seconds" + l + "0.12", "embody_job_comm_seconds" + l + "0.03",
        "embody_job_grad_norm" + l + "1.5", "embody_job_learning_rate" + l + "0.0003",
        "embody_job_padding_ratio" + l + "0.125",
        "embody_job_packing_efficiency_ratio" + l + "0.875", "embody_job_mfu_ratio" + l + "0.42",
        "embody_job_reward_mean" + l + "-2", "embody_job_steps_total" + l + "12",
        std::string("# TYPE embody_job_steps_total counter"),
        std::string("# TYPE embody_job_loss gauge")}) {
    EXPECT_TRUE(Has(text, line)) << line << "\n" << text;
  }
  // optimizer_ms (10 ms) lands on the same name as optimizer_seconds, in seconds: either order
  // of the two fields gives 0.01.
  EXPECT_TRUE(Has(text, "embody_job_optimizer_seconds" + l + "0.01")) << text;
  EXPECT_FALSE(Has(text, "note"));
  EXPECT_FALSE(Has(text, "embody_job_ok"));
  EXPECT_FALSE(Has(text, "phases"));
  EXPECT_FALSE(Has(text, "{")) << text;
  EXPECT_FALSE(Has(text, "acme")) << text;
  EXPECT_TRUE(Has(m.Serialize(), "embody_agent_job_series_dropped_total 0"));
  EXPECT_EQ(m.SerializeJob(4), "");

  // Later events update the values; fields a later event leaves out keep their last value.
  m.ObserveStep(3, "acme", json{{"step", 13}, {"loss", 0.5}});
  text = m.SerializeJob(3);
  EXPECT_TRUE(Has(text, "embody_job_loss" + l + "0.5"));
  EXPECT_TRUE(Has(text, "embody_job_steps_total" + l + "13"));
  EXPECT_TRUE(Has(text, "embody_job_mfu_ratio" + l + "0.42"));
}

TEST(AgentMetricsTest, SeriesNamesPerJobAreBoundedAndDropsCounted) {
  AgentMetrics m;
  json step{{"step", 1}};
  for (size_t i = 0; i < AgentMetrics::kMaxSeriesPerJob + 10; ++i) {
    step["field_" + std::to_string(1000 + i)] = static_cast<double>(i);
  }
  step["steps_total"] = 5;  // refused name: counted too
  m.ObserveStep(1, "t", step);
  std::string text = m.SerializeJob(1);
  // kMaxSeriesPerJob gauges, plus embody_job_step (always kept) and embody_job_steps_total.
  EXPECT_EQ(Samples(text), AgentMetrics::kMaxSeriesPerJob + 2) << text;
  EXPECT_TRUE(Has(text, "embody_job_step 1\n"));
  // 74 named fields for 64 places: 10 over the limit, plus the refused one.
  EXPECT_TRUE(Has(m.Serialize(), "embody_agent_job_series_dropped_total 11")) << m.Serialize();

  // Names already held keep updating; another job has its own budget.
  step = json{{"field_1000", 42.0}, {"field_1073", 1.0}};
  m.ObserveStep(1, "t", step);
  m.ObserveStep(2, "t", json{{"loss", 1}});
  text = m.SerializeJob(1);
  EXPECT_TRUE(Has(text, "embody_job_field_1000 42"));
  EXPECT_FALSE(Has(text, "embody_job_field_1073"));
  EXPECT_FALSE(Has(text, "embody_job_loss"));
  EXPECT_TRUE(Has(m.SerializeJob(2), "embody_job_loss 1"));
  EXPECT_TRUE(Has(m.Serialize(), "embody_agent_job_series_dropped_total 12"));
}

TEST(AgentMetricsTest, RemoveJobDropsAllItsSeries) {
  AgentMetrics m;
  m.ObserveStep(7, "a", json{{"step", 1}, {"loss", 2}, {"custom_thing", 3}});
  m.ObserveStep(8, "b", json{{"step", 4}, {"custom_thing", 5}});
  m.RemoveJob(7);
  EXPECT_EQ(m.SerializeJob(7), "");  // no empty families left behind either
  EXPECT_TRUE(Has(m.SerializeJob(8), "embody_job_custom_thing 5"));
  m.RemoveJob(8);
  EXPECT_EQ(m.SerializeJob(8), "");
}

class FixedCollector : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override {
    auto f = MakeFamily("embody_test_value", "test", prometheus::MetricType::Gauge);
    AddSample(f, {{"k", "v"}}, 2.5);
    return {f};
  }
};

class JobCollector : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override {
    auto f = MakeFamily("embody_job_process_test", "test", prometheus::MetricType::Gauge);
    AddSample(f, {{"job", "9"}, {"tenant", "globex-private"}, {"k", "kept"}}, 1);
    AddSample(f, {{"job", "19"}, {"tenant", "other"}}, 2);
    return {f};
  }
};

TEST(AgentMetricsTest, CollectorsAreReadAtEachScrape) {
  AgentMetrics m;
  FixedCollector c;
  m.AddNodeCollector(&c);
  EXPECT_TRUE(Has(m.Serialize(), R"(embody_test_value{k="v"} 2.5)"));
  EXPECT_TRUE(Has(m.Serialize(), R"(embody_test_value{k="v"} 2.5)"));
}

// What any job on the node can read: the agent's and the node's series, and nothing that names
// a job or a tenant. Each job's series are served apart, with the job collectors' samples of that
// job only, and no label naming the job or the tenant.
TEST(AgentMetricsTest, AnyoneGetsThePublicSetOnly) {
  AgentMetrics m;
  FixedCollector node;
  JobCollector jobs;
  m.AddNodeCollector(&node);
  m.AddJobCollector(&jobs);
  m.SetNode(8, 0);
  m.SetJobsRunning(2);
  m.HeartbeatSucceeded();
  m.ObserveStep(7, "acme-private", json{{"step", 3}, {"loss", 0.5}, {"tokens_per_s", 100}});

  std::string anyone = m.Serialize();
  for (const char* s :
       {"embody_agent_heartbeats_total 1", "embody_node_cpu_slots 8", "embody_agent_jobs_running 2",
        "embody_agent_job_series_dropped_total 0", R"(embody_test_value{k="v"} 2.5)"}) {
    EXPECT_TRUE(Has(anyone, s)) << s << "\n" << anyone;
  }
  for (const char* s : {"job=", "tenant=", "acme-private", "globex-private", "embody_job_"}) {
    EXPECT_FALSE(Has(anyone, s)) << s << "\n" << anyone;
  }

  std::string seven = m.SerializeJob(7);
  for (const char* s : {"embody_job_loss 0.5", "embody_job_steps_total 3",
                        "embody_job_tokens_per_second 100"}) {
    EXPECT_TRUE(Has(seven, s)) << s << "\n" << seven;
  }
  for (const char* s : {"job=", "tenant=", "acme-private", "embody_job_process_test", "embody_node_"}) {
    EXPECT_FALSE(Has(seven, s)) << s << "\n" << seven;
  }
  std::string nine = m.SerializeJob(9);
  EXPECT_TRUE(Has(nine, R"(embody_job_process_test{k="kept"} 1)")) << nine;
  for (const char* s : {"job=", "tenant=", "globex-private", "embody_job_loss"}) {
    EXPECT_FALSE(Has(nine, s)) << s << "\n" << nine;
  }
}

}  // namespace
}  // namespace agent
