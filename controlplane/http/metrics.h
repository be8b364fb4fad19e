// The server's Prometheus series, kept in one prometheus-cpp registry and served at /metrics in
// the text format (names and labels are listed in docs/contracts.md, "Server metrics"):
//   embody_http_requests_total{route,method,status}    counter; route is the pattern
//                                                       ("/v1/jobs/{id}"), never the raw path
//   embody_http_request_duration_seconds{route,method}  histogram; no status label, so a route has
//                                                       one set of buckets per method, not one per
//                                                       status as well (the counter has status)
//   embody_jobs{state,tenant}, embody_nodes{state}      gauges, refreshed by the scheduler loop;
//                                                       embody_jobs names tenants, so it is
//                                                       served only to a cluster-admin's scrape
//   embody_scheduler_queue_depth                        PENDING jobs, all tenants
//   embody_scheduler_cycle_seconds                      histogram, cycles run as leader
//   embody_scheduler_decisions_total{decision}          "scheduled" | "waiting", per job per cycle
//   embody_scheduler_leader                             1 on the replica that schedules
//   embody_db_pool_connections{state}                   "in_use" | "idle", read at scrape time
//   embody_db_pool_size, embody_db_errors_total         read at scrape time
//   embody_heartbeat_events_dropped_total{reason}       job events a heartbeat carried that the
//                                                       server dropped (api/job_event_check.h)
//   embody_launches_lost_total                          launches no agent acknowledged in time
//                                                       (the job requeued, or failed)
//   embody_plan_deviations_total                        train job attempts flagged far off their
//                                                       plan (service/plan_watch.h)
//   embody_forecast_error_seconds{what}                 histogram of |actual - forecast| of
//                                                       submitted jobs' start and end
//                                                       (service/forecast_service.h)
//   embody_job_launch_phase_seconds{phase}              histogram, one observation per phase of
//                                                       each attempt whose end was stored
//                                                       (service/launch_phases.h)
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "controlplane/service/scheduler_loop.h"

namespace controlplane::http {

// The connection pool as the metrics see it (filled from db::PgPool::Stats by the server).
struct DbPoolStats {
  int size = 0;
  int in_use = 0;
  int idle = 0;
  uint64_t errors = 0;
};

// The principal cache as the metrics see it (service::PrincipalCache::Stats).
struct AuthCacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;
  bool enabled = false;
};

// What the metrics read at every Serialize() from the parts that own the numbers; each may be
// null, and its series then stay at 0. Running totals are counted once however often read.
struct MetricsSources {
  std::function<AuthCacheStats()> auth_cache;  // the principal cache (--auth-cache)
  std::function<DbPoolStats()> db_pool;        // the store's connection pool, if it has one
  // Dropped heartbeat events by reason (NodeService::EventsDropped), a running total each.
  std::function<std::map<std::string, uint64_t>()> events_dropped;
  // Launches given up on (NodeService::LaunchesLost), a running total.
  std::function<uint64_t()> launches_lost;
  // Attempts flagged off their plan (PlanWatch::deviations), a running total.
  std::function<uint64_t()> plan_deviations;
};

class ServerMetrics {
 public:
  explicit ServerMetrics(MetricsSources sources = {});
  // One answered submission batch of `members` (service/submit_batcher.h; 1 for a lone one).
  void ObserveSubmitBatch(int members);
  // The consecutive phases of one attempt's launch (service::PhaseDurations): name, milliseconds.
  void ObserveLaunchPhases(const std::vector<std::pair<std::string, int64_t>>& phases);
  // How far a submitted job's forecast was off: `what` "start" or "end", actual minus forecast.
  void ObserveForecastError(const std::string& what, double seconds);
  // An unauthenticated refusal not written to the audit log: its address was over its budget.
  void CountAuditSuppressed() { audit_suppressed_.Increment(); }
  void ObserveRequest(const std::string& route, const std::string& method, int status,
                      double seconds);
  void ObserveCycle(const service::CycleStats& stats);
  // `with_tenant_series`: include the series that name tenants (a cluster-admin's scrape).
  std::string Serialize(bool with_tenant_series);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<prometheus::Registry> tenant_registry_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& durations_;
  prometheus::Family<prometheus::Gauge>& jobs_;
  prometheus::Family<prometheus::Gauge>& nodes_;
  prometheus::Gauge& queue_depth_;
  prometheus::Histogram& cycle_seconds_;
  prometheus::Family<prometheus::Counter>& decisions_;
  prometheus::Counter& scheduled_;
  prometheus::Counter& waiting_;
  prometheus::Gauge& leader_;
  prometheus::Family<prometheus::Gauge>& pool_connections_;
  prometheus::Gauge& pool_in_use_;
  prometheus::Gauge& pool_idle_;
  prometheus::Gauge& pool_size_;
  prometheus::Counter& db_errors_;
  prometheus::Family<prometheus::Counter>& events_dropped_;
  prometheus::Counter& launches_lost_;
  prometheus::Counter& plan_deviations_;
  prometheus::Counter& audit_suppressed_;
  prometheus::Histogram& submit_batch_members_;
  prometheus::Family<prometheus::Histogram>& launch_phases_;
  prometheus::Family<prometheus::Counter>& auth_lookups_;
  prometheus::Counter& auth_hits_;
  prometheus::Counter& auth_misses_;
  prometheus::Gauge& auth_enabled_;

  prometheus::Family<prometheus::Histogram>* forecast_errors_ = nullptr;  // set in the body

  std::mutex mu_;  // guards the members below and the read-modify-write of db_errors_
  std::set<std::pair<std::string, std::string>> job_series_;  // (state, tenant) ever exported
  uint64_t db_errors_seen_ = 0;
  std::map<std::string, uint64_t> dropped_seen_;
  uint64_t lost_seen_ = 0;
  uint64_t deviations_seen_ = 0;
  AuthCacheStats auth_seen_;
  const MetricsSources sources_;
};

}  // namespace controlplane::http
