// The server's series as Prometheus reads them: names, labels, and gauges that follow the
// scheduler's counts (a (state, tenant) pair that empties reads 0 rather than vanishing).
#include "controlplane/http/metrics.h"

#include <gtest/gtest.h>

namespace controlplane::http {
namespace {

bool Has(const std::string& text, const std::string& line) {
  return text.find(line + "\n") != std::string::npos;
}

TEST(ServerMetricsTest, RequestsByRouteMethodAndStatus) {
  ServerMetrics m;
  m.ObserveRequest("/v1/jobs/{id}", "GET", 404, 0.002);
  m.ObserveRequest("/v1/jobs/{id}", "GET", 404, 0.002);
  m.ObserveRequest("/v1/jobs", "POST", 201, 0.2);
  std::string t = m.Serialize(true);
  EXPECT_TRUE(
      Has(t, R"(embody_http_requests_total{method="GET",route="/v1/jobs/{id}",status="404"} 2)"))
      << t;
  EXPECT_TRUE(
      Has(t, R"(embody_http_request_duration_seconds_count{method="POST",route="/v1/jobs"} 1)"));
  EXPECT_TRUE(Has(
      t,
      R"(embody_http_request_duration_seconds_bucket{method="POST",route="/v1/jobs",le="0.25"} 1)"));
  EXPECT_TRUE(Has(
      t,
      R"(embody_http_request_duration_seconds_bucket{method="POST",route="/v1/jobs",le="0.1"} 0)"));
}

TEST(ServerMetricsTest, SchedulerJobsAndNodes) {
  ServerMetrics m;
  service::CycleStats s;
  s.leader = true;
  s.seconds = 0.003;
  s.scheduled = 2;
  s.waiting = 1;
  s.counted = true;
  s.queue_depth = 1;
  s.jobs[{"PENDING", "acme"}] = 1;
  s.jobs[{"RUNNING", "default"}] = 2;
  s.nodes_by_state = {{"UP", 3}, {"DOWN", 1}};
  m.ObserveCycle(s);
  std::string t = m.Serialize(true);
  EXPECT_TRUE(Has(t, R"(embody_jobs{state="PENDING",tenant="acme"} 1)")) << t;
  EXPECT_TRUE(Has(t, R"(embody_jobs{state="RUNNING",tenant="default"} 2)"));
  EXPECT_TRUE(Has(t, R"(embody_nodes{state="UP"} 3)"));
  EXPECT_TRUE(Has(t, R"(embody_nodes{state="DOWN"} 1)"));
  EXPECT_TRUE(Has(t, "embody_scheduler_queue_depth 1"));
  EXPECT_TRUE(Has(t, "embody_scheduler_cycle_seconds_count 1"));
  EXPECT_TRUE(Has(t, R"(embody_scheduler_decisions_total{decision="scheduled"} 2)"));
  EXPECT_TRUE(Has(t, R"(embody_scheduler_decisions_total{decision="waiting"} 1)"));
  EXPECT_TRUE(Has(t, "embody_scheduler_leader 1"));
  // A scrape without a cluster-admin's token sees no tenant, by name or otherwise.
  const std::string anonymous = m.Serialize(false);
  EXPECT_FALSE(Has(anonymous, "acme")) << anonymous;
  EXPECT_FALSE(Has(anonymous, "tenant=")) << anonymous;
  EXPECT_TRUE(Has(anonymous, R"(embody_nodes{state="UP"} 3)"));

  // Next cycle: acme's job was placed and finished; a follower's cycle and an uncounted one
  // change neither the decisions nor the cycle histogram.
  service::CycleStats next;
  next.leader = true;
  next.scheduled = 1;
  next.counted = true;
  next.jobs[{"RUNNING", "default"}] = 2;
  next.jobs[{"SUCCEEDED", "acme"}] = 1;
  next.nodes_by_state = {{"UP", 4}, {"DOWN", 0}};
  m.ObserveCycle(next);
  service::CycleStats follower;
  follower.scheduled = 5;
  m.ObserveCycle(follower);
  t = m.Serialize(true);
  EXPECT_TRUE(Has(t, R"(embody_jobs{state="PENDING",tenant="acme"} 0)")) << t;
  EXPECT_TRUE(Has(t, R"(embody_jobs{state="SUCCEEDED",tenant="acme"} 1)"));
  EXPECT_TRUE(Has(t, "embody_scheduler_queue_depth 0"));
  EXPECT_TRUE(Has(t, R"(embody_scheduler_decisions_total{decision="scheduled"} 3)"));
  EXPECT_TRUE(Has(t, "embody_scheduler_cycle_seconds_count 2"));
  EXPECT_TRUE(Has(t, "embody_scheduler_leader 0"));
  EXPECT_TRUE(Has(t, R"(embody_nodes{state="DOWN"} 0)"));
}

TEST(ServerMetricsTest, DatabasePoolIsReadAtScrapeTime) {
  DbPoolStats pool{16, 3, 2, 0};
  MetricsSources sources;
  sources.db_pool = [&pool] { return pool; };
  ServerMetrics m(std::move(sources));
  std::string t = m.Serialize(true);
  EXPECT_TRUE(Has(t, R"(embody_db_pool_connections{state="in_use"} 3)")) << t;
  EXPECT_TRUE(Has(t, R"(embody_db_pool_connections{state="idle"} 2)"));
  EXPECT_TRUE(Has(t, "embody_db_pool_size 16"));
  EXPECT_TRUE(Has(t, "embody_db_errors_total 0"));
  pool = {16, 0, 5, 4};
  t = m.Serialize(true);
  EXPECT_TRUE(Has(t, R"(embody_db_pool_connections{state="in_use"} 0)")) << t;
  EXPECT_TRUE(Has(t, "embody_db_errors_total 4"));
  EXPECT_TRUE(Has(t, "embody_db_errors_total 4"));  // read twice, counted once
  t = m.Serialize(true);
  EXPECT_TRUE(Has(t, "embody_db_errors_total 4"));
}

TEST(ServerMetricsTest, DroppedHeartbeatEventsFollowTheirSourceByReason) {
  std::map<std::string, uint64_t> dropped;
  MetricsSources sources;
  sources.events_dropped = [&dropped] { return dropped; };
  ServerMetrics m(std::move(sources));
  std::string t = m.Serialize(false);
  EXPECT_FALSE(Has(t, "embody_heartbeat_events_dropped_total{")) << t;
  dropped = {{"bad_text", 2}};
  t = m.Serialize(false);
  EXPECT_TRUE(Has(t, R"(embody_heartbeat_events_dropped_total{reason="bad_text"} 2)")) << t;
  dropped = {{"bad_text", 3}, {"too_large", 1}};
  t = m.Serialize(false);
  t = m.Serialize(false);  // read twice, counted once
  EXPECT_TRUE(Has(t, R"(embody_heartbeat_events_dropped_total{reason="bad_text"} 3)")) << t;
  EXPECT_TRUE(Has(t, R"(embody_heartbeat_events_dropped_total{reason="too_large"} 1)")) << t;
}

TEST(ServerMetricsTest, LostLaunchesFollowTheirSource) {
  uint64_t lost = 0;
  MetricsSources sources;
  sources.launches_lost = [&lost] { return lost; };
  ServerMetrics m(std::move(sources));
  EXPECT_TRUE(Has(m.Serialize(false), "embody_launches_lost_total 0"));
  lost = 2;
  std::string t = m.Serialize(false);
  t = m.Serialize(false);  // read twice, counted once
  EXPECT_TRUE(Has(t, "embody_launches_lost_total 2")) << t;
}

TEST(ServerMetricsTest, LaunchPhasesAreHistogramsByPhase) {
  ServerMetrics m;
  m.ObserveLaunchPhases({{"sandbox", 12}, {"run", 2000}, {"transit", -1}});
  m.ObserveLaunchPhases({{"sandbox", 3}});
  const std::string t = m.Serialize(false);
  EXPECT_TRUE(Has(t, R"(embody_job_launch_phase_seconds_count{phase="sandbox"} 2)")) << t;
  EXPECT_TRUE(Has(t, R"(embody_job_launch_phase_seconds_sum{phase="sandbox"} 0.015)")) << t;
  EXPECT_TRUE(Has(t, R"(embody_job_launch_phase_seconds_bucket{phase="sandbox",le="0.005"} 1)"))
      << t;
  EXPECT_TRUE(Has(t, R"(embody_job_launch_phase_seconds_sum{phase="run"} 2)")) << t;
  // Two clocks' rounding can put transit a millisecond below zero: observed as 0.
  EXPECT_TRUE(Has(t, R"(embody_job_launch_phase_seconds_sum{phase="transit"} 0)")) << t;
}

TEST(ServerMetricsTest, SubmitBatchSizesAreAHistogram) {
  ServerMetrics m;
  m.ObserveSubmitBatch(1);
  m.ObserveSubmitBatch(3);
  m.ObserveSubmitBatch(40);
  const std::string t = m.Serialize(false);
  EXPECT_TRUE(Has(t, R"(embody_submit_batch_members_bucket{le="1"} 1)")) << t;
  EXPECT_TRUE(Has(t, R"(embody_submit_batch_members_bucket{le="4"} 2)")) << t;
  EXPECT_TRUE(Has(t, R"(embody_submit_batch_members_bucket{le="64"} 3)")) << t;
  EXPECT_TRUE(Has(t, "embody_submit_batch_members_count 3")) << t;
  EXPECT_TRUE(Has(t, "embody_submit_batch_members_sum 44")) << t;
}

TEST(ServerMetricsTest, AuthLookupsFollowTheCache) {
  AuthCacheStats a;
  MetricsSources sources;
  sources.auth_cache = [&a] { return a; };
  ServerMetrics m(std::move(sources));
  std::string t = m.Serialize(false);
  EXPECT_TRUE(Has(t, "embody_auth_cache_enabled 0")) << t;
  a = {10, 2, true};
  t = m.Serialize(false);
  t = m.Serialize(false);  // read twice, counted once
  EXPECT_TRUE(Has(t, R"(embody_auth_lookups_total{source="cache"} 10)")) << t;
  EXPECT_TRUE(Has(t, R"(embody_auth_lookups_total{source="database"} 2)")) << t;
  EXPECT_TRUE(Has(t, "embody_auth_cache_enabled 1")) << t;
}

TEST(ServerMetricsTest, PlanDeviationsFollowTheirSource) {
  uint64_t flagged = 0;
  MetricsSources sources;
  sources.plan_deviations = [&flagged] { return flagged; };
  ServerMetrics m(std::move(sources));
  EXPECT_TRUE(Has(m.Serialize(false), "embody_plan_deviations_total 0"));
  flagged = 3;
  std::string t = m.Serialize(false);
  t = m.Serialize(false);  // read twice, counted once
  EXPECT_TRUE(Has(t, "embody_plan_deviations_total 3")) << t;
}

}  // namespace
}  // namespace controlplane::http
