#include "controlplane/http/metrics.h"

#include <algorithm>
#include <cmath>

#include <prometheus/text_serializer.h>

namespace controlplane::http {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

namespace {
const prometheus::Histogram::BucketBoundaries kLatencyBuckets = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};

// From a millisecond (a sandbox made in no time) to minutes (a queue, a job's own run).
const prometheus::Histogram::BucketBoundaries kPhaseBuckets = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};

prometheus::Gauge& OneGauge(prometheus::Registry& r, const std::string& name,
                            const std::string& help, const prometheus::Labels& labels = {}) {
  return BuildGauge().Name(name).Help(help).Register(r).Add(labels);
}
}  // namespace

ServerMetrics::ServerMetrics(MetricsSources sources)
    : registry_(std::make_shared<prometheus::Registry>()),
      tenant_registry_(std::make_shared<prometheus::Registry>()),
      requests_(BuildCounter()
                    .Name("embody_http_requests_total")
                    .Help("HTTP requests served, by route pattern, method and status")
                    .Register(*registry_)),
      durations_(BuildHistogram()
                     .Name("embody_http_request_duration_seconds")
                     .Help("Time to answer an HTTP request, by route pattern and method")
                     .Register(*registry_)),
      jobs_(BuildGauge()
                .Name("embody_jobs")
                .Help("Jobs by state and tenant")
                .Register(*tenant_registry_)),
      nodes_(BuildGauge().Name("embody_nodes").Help("Nodes by state").Register(*registry_)),
      queue_depth_(OneGauge(*registry_, "embody_scheduler_queue_depth",
                            "Jobs waiting in PENDING, all tenants")),
      cycle_seconds_(BuildHistogram()
                         .Name("embody_scheduler_cycle_seconds")
                         .Help("Duration of one scheduler cycle run as leader")
                         .Register(*registry_)
                         .Add({}, kLatencyBuckets)),
      decisions_(BuildCounter()
                     .Name("embody_scheduler_decisions_total")
                     .Help("Scheduling decisions: a pending job placed (scheduled) or left "
                           "waiting for room, counted once per job per cycle")
                     .Register(*registry_)),
      scheduled_(decisions_.Add({{"decision", "scheduled"}})),
      waiting_(decisions_.Add({{"decision", "waiting"}})),
      leader_(OneGauge(*registry_, "embody_scheduler_leader",
                       "1 when this replica holds the scheduler lock")),
      pool_connections_(BuildGauge()
                            .Name("embody_db_pool_connections")
                            .Help("PostgreSQL connections of the pool, by state")
                            .Register(*registry_)),
      pool_in_use_(pool_connections_.Add({{"state", "in_use"}})),
      pool_idle_(pool_connections_.Add({{"state", "idle"}})),
      pool_size_(OneGauge(*registry_, "embody_db_pool_size",
                          "Most PostgreSQL connections the pool opens")),
      db_errors_(BuildCounter()
                     .Name("embody_db_errors_total")
                     .Help("Failed PostgreSQL statements, commits and connection attempts")
                     .Register(*registry_)
                     .Add({})),
      events_dropped_(BuildCounter()
                          .Name("embody_heartbeat_events_dropped_total")
                          .Help("Job events in heartbeats that the server dropped (the rest of "
                                "the heartbeat stored), by reason")
                          .Register(*registry_)),
      launches_lost_(BuildCounter()
                         .Name("embody_launches_lost_total")
                         .Help("Launches no agent acknowledged within the resend limit (the job "
                               "was requeued, or failed when out of restarts)")
                         .Register(*registry_)
                         .Add({})),
      plan_deviations_(BuildCounter()
                           .Name("embody_plan_deviations_total")
                           .Help("Train job attempts whose step time stayed far above their "
                                 "plan's (a plan_deviation event each)")
                           .Register(*registry_)
                           .Add({})),
      audit_suppressed_(BuildCounter()
                            .Name("embody_audit_suppressed_total")
                            .Help("Unauthenticated refusals not written to the audit log, their "
                                  "client address being over its budget of rows")
                            .Register(*registry_)
                            .Add({})),
      submit_batch_members_(BuildHistogram()
                                .Name("embody_submit_batch_members")
                                .Help("Submissions written per transaction of POST /v1/jobs "
                                      "(the submission batcher; 1 for a lone one)")
                                .Register(*registry_)
                                .Add({}, prometheus::Histogram::BucketBoundaries{
                                             1, 2, 4, 8, 16, 32, 64, 128, 256})),
      launch_phases_(BuildHistogram()
                         .Name("embody_job_launch_phase_seconds")
                         .Help("Where launches spend their time: each phase of an attempt from "
                               "submission to its exit stored (queued, dispatch, sandbox, spawn, "
                               "run, cleanup, report, transit), observed when its end is stored")
                         .Register(*registry_)),
      auth_lookups_(BuildCounter()
                        .Name("embody_auth_lookups_total")
                        .Help("Bearer tokens authenticated, by where the answer came from: "
                              "cache (memory) or database")
                        .Register(*registry_)),
      auth_hits_(auth_lookups_.Add({{"source", "cache"}})),
      auth_misses_(auth_lookups_.Add({{"source", "database"}})),
      auth_enabled_(OneGauge(*registry_, "embody_auth_cache_enabled",
                             "1 while the principal cache is on (its listener is listening)")),
      sources_(std::move(sources)) {
  nodes_.Add({{"state", "UP"}}).Set(0);
  nodes_.Add({{"state", "DOWN"}}).Set(0);
  forecast_errors_ = &BuildHistogram()
                          .Name("embody_forecast_error_seconds")
                          .Help("How far submitted jobs' forecasts were off: |actual - "
                                "forecast| of the start (what=start) and of the end of a run "
                                "that succeeded (what=end)")
                          .Register(*registry_);
}

void ServerMetrics::ObserveForecastError(const std::string& what, double seconds) {
  static const prometheus::Histogram::BucketBoundaries kBuckets = {
      0.1, 0.5, 1, 5, 15, 30, 60, 300, 900, 1800, 3600, 7200, 21600, 86400};
  forecast_errors_->Add({{"what", what}}, kBuckets).Observe(std::abs(seconds));
}

void ServerMetrics::ObserveRequest(const std::string& route, const std::string& method, int status,
                                   double seconds) {
  requests_.Add({{"route", route}, {"method", method}, {"status", std::to_string(status)}})
      .Increment();
  durations_.Add({{"route", route}, {"method", method}}, kLatencyBuckets).Observe(seconds);
}

void ServerMetrics::ObserveCycle(const service::CycleStats& stats) {
  std::lock_guard<std::mutex> lock(mu_);
  leader_.Set(stats.leader ? 1 : 0);
  if (stats.leader) {
    cycle_seconds_.Observe(stats.seconds);
    scheduled_.Increment(static_cast<double>(stats.scheduled));
    waiting_.Increment(static_cast<double>(stats.waiting));
  }
  if (!stats.counted) return;
  // A (state, tenant) pair that had jobs and has none now reads 0 rather than vanishing, so
  // rate() and alerts over it see the drop.
  for (const auto& key : job_series_) {
    if (!stats.jobs.count(key)) jobs_.Add({{"state", key.first}, {"tenant", key.second}}).Set(0);
  }
  for (const auto& [key, n] : stats.jobs) {
    jobs_.Add({{"state", key.first}, {"tenant", key.second}}).Set(static_cast<double>(n));
    job_series_.insert(key);
  }
  for (const auto& [state, n] : stats.nodes_by_state) {
    nodes_.Add({{"state", state}}).Set(static_cast<double>(n));
  }
  queue_depth_.Set(static_cast<double>(stats.queue_depth));
}

void ServerMetrics::ObserveSubmitBatch(int members) {
  submit_batch_members_.Observe(static_cast<double>(members));
}

void ServerMetrics::ObserveLaunchPhases(
    const std::vector<std::pair<std::string, int64_t>>& phases) {
  for (const auto& [phase, ms] : phases) {
    // A phase measured across two clocks (transit) can come out a millisecond below zero.
    launch_phases_.Add({{"phase", phase}}, kPhaseBuckets)
        .Observe(static_cast<double>(std::max<int64_t>(0, ms)) / 1000.0);
  }
}

std::string ServerMetrics::Serialize(bool with_tenant_series) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (sources_.events_dropped) {
      for (const auto& [reason, total] : sources_.events_dropped()) {
        uint64_t& seen = dropped_seen_[reason];
        if (total > seen) {
          events_dropped_.Add({{"reason", reason}}).Increment(static_cast<double>(total - seen));
          seen = total;
        }
      }
    }
    if (sources_.launches_lost) {
      const uint64_t total = sources_.launches_lost();
      if (total > lost_seen_) {
        launches_lost_.Increment(static_cast<double>(total - lost_seen_));
        lost_seen_ = total;
      }
    }
    if (sources_.plan_deviations) {
      const uint64_t total = sources_.plan_deviations();
      if (total > deviations_seen_) {
        plan_deviations_.Increment(static_cast<double>(total - deviations_seen_));
        deviations_seen_ = total;
      }
    }
    if (sources_.auth_cache) {
      const AuthCacheStats a = sources_.auth_cache();
      if (a.hits > auth_seen_.hits) auth_hits_.Increment(static_cast<double>(a.hits - auth_seen_.hits));
      if (a.misses > auth_seen_.misses) {
        auth_misses_.Increment(static_cast<double>(a.misses - auth_seen_.misses));
      }
      auth_seen_ = a;
      auth_enabled_.Set(a.enabled ? 1 : 0);
    }
    if (sources_.db_pool) {
      DbPoolStats s = sources_.db_pool();
      pool_in_use_.Set(s.in_use);
      pool_idle_.Set(s.idle);
      pool_size_.Set(s.size);
      if (s.errors > db_errors_seen_) {
        db_errors_.Increment(static_cast<double>(s.errors - db_errors_seen_));
        db_errors_seen_ = s.errors;
      }
    }
  }
  auto families = registry_->Collect();
  if (with_tenant_series) {
    auto more = tenant_registry_->Collect();
    families.insert(families.end(), more.begin(), more.end());
  }
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace controlplane::http
