// Server::Build and the builder behind it and Server::Start (server_pg.cc): the services wired
// onto one store, the scheduler loop, the sweepers and the HTTP API, started in that order and
// stopped in reverse. Nothing here knows which store it is built on.
#include "controlplane/server.h"

#include <sys/stat.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "common/file_util.h"
#include "common/http/server_tls.h"
#include "common/log.h"
#include "common/time_util.h"
#include "controlplane/http/api_server.h"
#include "controlplane/http/ready_check.h"
#include "controlplane/service/audit_scope.h"
#include "controlplane/service/forecast_service.h"
#include "controlplane/service/history_retention.h"
#include "controlplane/service/log_files.h"
#include "controlplane/service/plan_watch.h"
#include "controlplane/service/scheduler_loop.h"

namespace controlplane {

using common::Result;
using common::Status;

struct Server::Impl {
  // What `store` refers to when the server owns it (Start): declared first, so destroyed last.
  std::shared_ptr<void> owned;
  ServerStore store;
  ServerOptions opts;
  service::Clock now = [] { return common::NowMillis(); };
  // Authenticated tokens (--auth-cache), emptied by every token or tenant change this replica
  // commits (watched) or hears of from the others (the store's principal feed).
  service::PrincipalCache principal_cache;
  bool principal_feed_started = false;
  std::unique_ptr<service::PrincipalWatchedDatabase> watched;
  // What every service and the router use: the database whose units of work write the audit
  // row of the call they commit for (service/audit_scope.h).
  std::unique_ptr<service::AuditedDatabase> database;
  std::unique_ptr<http::CachedCheck> ready_check;  // /readyz; null when the store has no check
  std::unique_ptr<service::LogFiles> log_files;
  std::unique_ptr<service::CheckpointFiles> checkpoint_files;
  std::unique_ptr<service::CheckpointsService> checkpoints;
  std::unique_ptr<http::ServerMetrics> metrics;
  service::NodeHeard heard;  // heartbeats received, for the DOWN rule before they commit
  std::unique_ptr<service::SchedulerLoop> scheduler;
  // Held heartbeats: a quarter of the HTTP server's 32 worker threads at most, so requests
  // (and heartbeats answered at once) always find threads.
  service::NodeWaiters waiters{8};
  std::unique_ptr<service::JobsService> jobs;
  std::unique_ptr<service::NodeService> nodes;
  std::unique_ptr<service::PlanWatch> plan_watch;  // null without --plan-cluster
  std::unique_ptr<service::ForecastService> forecasts;
  std::unique_ptr<service::TenantsService> tenants;
  std::unique_ptr<service::TokensService> tokens;
  std::unique_ptr<service::DatasetUploadFiles> upload_files;
  std::unique_ptr<service::DatasetUploads> uploads;
  std::unique_ptr<service::DatasetsService> datasets;
  std::unique_ptr<service::PipelinesService> pipelines;  // its driver thread runs from Start
  std::unique_ptr<service::HistoryRetention> history;
  // The sweepers (dataset uploads; history, audit and usage retention), one thread each.
  std::vector<std::thread> sweepers;
  std::mutex sweeper_mu;
  std::condition_variable sweeper_cv;
  bool sweeper_stop = false;
  std::unique_ptr<http::ApiServer> api;
  std::thread serve_thread;
  service::BootstrapResult bootstrap;
  int port = 0;
  bool stopped = false;

  // The services, the scheduler loop and what connects them, made from `opts` on `database`.
  Status WireServices();
  // What the router needs: the services, the metrics, the store's ready check.
  http::ApiDeps ApiDependencies(std::shared_ptr<const common::http::ServerTls> tls);
  // The upload and retention sweepers, as `opts` asks.
  void StartSweepers();

  // The feed writes into principal_cache: it stops before the cache goes, whatever `owned` is.
  ~Impl() { StopPrincipalFeed(); }

  void StopPrincipalFeed() {
    if (principal_feed_started && store.stop_principal_feed) store.stop_principal_feed();
    principal_feed_started = false;
  }

  // Runs `round` every `period` on a thread of its own until StopSweepers.
  void SweepEvery(std::chrono::seconds period, std::function<void()> round) {
    sweepers.emplace_back([this, period, round = std::move(round)] {
      std::unique_lock<std::mutex> lock(sweeper_mu);
      while (!sweeper_cv.wait_for(lock, period, [this] { return sweeper_stop; })) {
        lock.unlock();
        round();
        lock.lock();
      }
    });
  }

  void StopSweepers() {
    {
      std::lock_guard<std::mutex> lock(sweeper_mu);
      sweeper_stop = true;
    }
    sweeper_cv.notify_all();
    for (std::thread& t : sweepers) {
      if (t.joinable()) t.join();
    }
  }
};

namespace {

Status WriteBootstrapFile(const std::string& path, const service::BootstrapResult& b) {
  nlohmann::json j{
      {"admin_token", b.admin_token}, {"agent_token", b.agent_token}, {"tenant", b.tenant}};
  // Created 0600 before any secret is written into it.
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return common::Internal("cannot write " + path);
  ::chmod(path.c_str(), 0600);
  std::string text = j.dump() + "\n";
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = std::fclose(f) == 0 && ok;
  return ok ? Status::Ok() : common::Internal("cannot write " + path);
}

}  // namespace

Status Server::Impl::WireServices() {
  Impl* raw = this;
  log_files = std::make_unique<service::LogFiles>(opts.data_dir);
  // Read at scrape time only, once every part they read is made.
  http::MetricsSources sources;
  sources.db_pool = store.pool_stats;
  if (opts.auth_cache) {
    sources.auth_cache = [raw] {
      service::PrincipalCache::Stats s = raw->principal_cache.GetStats();
      return http::AuthCacheStats{s.hits, s.misses, s.enabled};
    };
  }
  sources.events_dropped = [raw] { return raw->nodes->EventsDropped(); };
  sources.launches_lost = [raw] { return raw->nodes->LaunchesLost(); };
  if (!opts.plan_cluster.empty()) {
    sources.plan_deviations = [raw] { return raw->plan_watch->deviations(); };
  }
  metrics = std::make_unique<http::ServerMetrics>(std::move(sources));
  service::SchedulerLoop::Options loop_opts;
  loop_opts.heartbeat_interval_ms = opts.heartbeat_interval_ms;
  loop_opts.period_ms = opts.scheduler_period_ms;
  if (opts.preempt_min_priority >= 0) {
    loop_opts.schedule.preempt_min_priority = opts.preempt_min_priority;
  }
  loop_opts.schedule.preempt_grace_ms = opts.preempt_grace_ms;
  loop_opts.schedule.fair_share_half_life_seconds = opts.fair_share_half_life_s;
  loop_opts.schedule.max_reservations = opts.max_reservations;
  if (!opts.plan_cluster.empty()) {
    EMBODY_ASSIGN_OR_RETURN(text, common::ReadFile(opts.plan_cluster));
    service::PlanWatchOptions watch;
    watch.cluster = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (watch.cluster.is_discarded()) {
      return common::InvalidArgument("not valid JSON: " + opts.plan_cluster, "--plan-cluster");
    }
    watch.ratio = opts.plan_deviation_percent / 100.0;
    watch.steps = opts.plan_deviation_steps;
    auto made = service::PlanWatch::Make(std::move(watch));
    if (!made.ok()) {
      return common::InvalidArgument(
          opts.plan_cluster + ": " + made.status().field() + ": " + made.status().message(),
          "--plan-cluster");
    }
    plan_watch = std::move(*made);
  }
  service::ForecastServiceOptions forecast_opts;
  forecast_opts.forecast.schedule = loop_opts.schedule;
  forecast_opts.default_max_priority = opts.default_max_priority;
  forecast_opts.snapshot_max_age_ms = opts.forecast_snapshot_max_age_ms;
  forecast_opts.learn_hand_over = opts.forecast_hand_over != 0;
  forecast_opts.hand_over_prior_ms = opts.heartbeat_interval_ms;
  forecast_opts.plan_max_age_ms = opts.forecast_plan_max_age_ms;
  forecast_opts.observe_error = [raw](const std::string& what, double seconds) {
    raw->metrics->ObserveForecastError(what, seconds);
  };
  forecasts = std::make_unique<service::ForecastService>(
      *database, opts.limits, now, std::move(forecast_opts), plan_watch.get());

  // Built in the order of their dependencies, each complete once built: the forecasts (which the
  // loop tells) before the scheduler loop, the loop before the services that wake it (jobs,
  // nodes, datasets, pipelines). The loop and the node service share `heard` and `waiters`
  // rather than knowing each other, so there is no cycle to break.
  service::ForecastService* forecaster = forecasts.get();
  service::SchedulerLoopHooks loop_hooks;
  loop_hooks.heard = &heard;
  loop_hooks.on_decided = [raw](const service::CycleStats& s) {
    // The launches of this cycle go out in the held heartbeats of their head nodes now, and
    // heartbeats that reported the ends it placed onto stop waiting for it.
    if (s.preempted) {
      raw->waiters.NotifyAll();
    } else {
      raw->waiters.Notify(s.command_nodes);
    }
    raw->waiters.PassDone(s.seq);
  };
  loop_hooks.forecast =
      [forecaster](const service::ClusterSnapshot& s, const std::vector<service::JobRecord>& jobs,
                   std::vector<int64_t> ids) { forecaster->OnNewPending(s, jobs, std::move(ids)); };
  loop_hooks.forecast_idle = [forecaster] { forecaster->ForgetSnapshot(); };
  scheduler = std::make_unique<service::SchedulerLoop>(
      *database, loop_opts, now, store.try_lead,
      [raw](const service::CycleStats& s) { raw->metrics->ObserveCycle(s); },
      std::move(loop_hooks));
  service::SchedulerLoop* loop = scheduler.get();
  auto wake = [loop] { loop->Wake(); };
  // Nodes wake it for freed capacity (a job ended, a node back or undrained): at once.
  auto wake_for_capacity = [loop] { loop->WakeForCapacity(); };
  service::SubmitBatchOptions batching{opts.submit_batch_window_us, opts.submit_batch_max};
  batching.observe_batch = [raw](int members) { raw->metrics->ObserveSubmitBatch(members); };
  batching.default_max_priority = opts.default_max_priority;
  jobs = std::make_unique<service::JobsService>(*database, opts.limits, now, wake,
                                                std::move(batching));
  service::NodeServiceHooks node_hooks;
  node_hooks.waiters = &waiters;
  node_hooks.wake_for_pass = [loop] { return loop->WakeForCapacity(); };
  node_hooks.heard = &heard;
  node_hooks.plan_watch = plan_watch.get();
  node_hooks.hand_over = &forecasts->hand_over();
  node_hooks.on_launch_phases = [raw](const service::LaunchPhases& p) {
    raw->metrics->ObserveLaunchPhases(service::PhaseDurations(p));
  };
  nodes = std::make_unique<service::NodeService>(*database, *log_files, opts.heartbeat_interval_ms,
                                                 now, wake_for_capacity, std::move(node_hooks));

  tenants = std::make_unique<service::TenantsService>(*database, now);
  service::CheckpointLimits ckpt_limits;
  ckpt_limits.max_bytes = int64_t{opts.checkpoint_max_mib} << 20;
  ckpt_limits.tenant_quota_bytes = int64_t{opts.checkpoint_quota_gib} << 30;
  ckpt_limits.max_per_job = opts.checkpoint_max_per_job;
  ckpt_limits.upload_ttl_ms = int64_t{opts.checkpoint_upload_ttl_s} * 1000;
  checkpoint_files = std::make_unique<service::CheckpointFiles>(opts.data_dir);
  checkpoints =
      std::make_unique<service::CheckpointsService>(*database, *checkpoint_files, ckpt_limits, now);
  tokens = std::make_unique<service::TokensService>(*database, now);
  if (opts.dataset_upload_max_gib > 0) {
    EMBODY_RETURN_IF_ERROR(common::MakeDirs(opts.data_dir + "/dataset-uploads"));
    ::chmod((opts.data_dir + "/dataset-uploads").c_str(), 0700);
    service::DatasetUploadLimits upload_limits;
    upload_limits.max_bytes = int64_t{opts.dataset_upload_max_gib} << 30;
    upload_limits.max_per_tenant = opts.dataset_uploads_per_tenant;
    upload_limits.ttl_ms = int64_t{opts.dataset_upload_ttl_s} * 1000;
    upload_files = std::make_unique<service::DatasetUploadFiles>(opts.data_dir);
    uploads = std::make_unique<service::DatasetUploads>(*database, *upload_files, upload_limits,
                                                        opts.dataset_root, now, wake);
  }
  datasets = std::make_unique<service::DatasetsService>(*database, opts.dataset_root, now, wake,
                                                        uploads.get(), opts.image_registries);

  service::PipelinesOptions pipeline_opts;
  pipeline_opts.limits = opts.limits;
  pipeline_opts.dataset_root = opts.dataset_root;
  pipeline_opts.default_max_priority = opts.default_max_priority;
  pipelines = std::make_unique<service::PipelinesService>(*database, *jobs,
                                                          std::move(pipeline_opts), now, wake);

  return Status::Ok();
}

http::ApiDeps Server::Impl::ApiDependencies(std::shared_ptr<const common::http::ServerTls> tls) {
  Impl* raw = this;
  http::ApiDeps deps;
  deps.db = database.get();
  deps.tenants = tenants.get();
  deps.tokens = tokens.get();
  deps.checkpoints = checkpoints.get();
  deps.datasets = datasets.get();
  deps.pipelines = pipelines.get();
  deps.dataset_uploads = uploads.get();
  deps.now_ms = now;
  deps.router.rate_limit_per_s = opts.rate_limit_per_s;
  deps.router.rate_limit_burst =
      opts.rate_limit_burst > 0 ? opts.rate_limit_burst : opts.rate_limit_per_s;
  deps.router.audit = opts.audit;
  deps.router.anonymous_audit_burst = opts.audit_anonymous_burst;
  deps.router.principal_cache = opts.auth_cache ? &principal_cache : nullptr;
  deps.jobs = jobs.get();
  deps.forecasts = forecasts.get();
  deps.nodes = nodes.get();
  deps.metrics = metrics.get();
  deps.web_dir = opts.web_dir;
  if (store.ready) {
    // Checked at most once a second however often it is probed (ready_check.h).
    ready_check = std::make_unique<http::CachedCheck>(store.ready, 1.0,
                                                      [] { return common::MonotonicSeconds(); });
    deps.ready = [raw] { return raw->ready_check->Get(); };
  }
  deps.tls = tls;
  return deps;
}

void Server::Impl::StartSweepers() {
  Impl* raw = this;
  if (uploads) {
    // Often enough that an ended import's blob leaves the disk within seconds; each round is one
    // indexed query plus a directory listing.
    SweepEvery(std::chrono::seconds(2), [raw] {
      auto swept = raw->uploads->Sweep();
      if (!swept.ok()) {
        common::LogWarn("dataset upload sweep failed", {{"error", swept.status().ToString()}});
      }
    });
  }
  service::RecordRetention records;
  records.audit_max_age_ms = int64_t{opts.audit_retention_days} * 86'400'000;
  records.usage_max_age_ms = int64_t{opts.usage_retention_days} * 86'400'000;
  if (opts.history_retention_days > 0) {
    history = std::make_unique<service::HistoryRetention>(
        *database, *log_files, now, int64_t{opts.history_retention_days} * 86'400'000);
  }
  if (history || records.audit_max_age_ms > 0 || records.usage_max_age_ms > 0) {
    // A minute between sweeps, each of a bounded number of jobs and rows: a backlog (a first
    // start with years of history) drains without holding the database for long.
    SweepEvery(std::chrono::seconds(60), [raw, records] {
      if (raw->history) {
        auto swept = raw->history->Sweep();
        if (!swept.ok()) {
          common::LogWarn("history retention sweep failed", {{"error", swept.status().ToString()}});
        }
      }
      auto pruned = service::PruneRecords(*raw->database, raw->now(), records);
      if (!pruned.ok()) {
        common::LogWarn("audit and usage retention sweep failed",
                        {{"error", pruned.status().ToString()}});
      }
    });
  }
}

Result<std::shared_ptr<const common::http::ServerTls>> Server::Prepare(const ServerOptions& opts) {
  std::shared_ptr<const common::http::ServerTls> tls;
  if (!opts.tls_cert.empty() || !opts.tls_key.empty()) {
    auto loaded = common::http::ServerTls::Load({opts.tls_cert, opts.tls_key});
    if (!loaded.ok()) {
      const common::Status& st = loaded.status();
      return common::Status(st.code(), st.message(), "--" + st.field());
    }
    tls = *loaded;
  }
  EMBODY_RETURN_IF_ERROR(common::MakeDirs(opts.data_dir + "/logs"));
  EMBODY_RETURN_IF_ERROR(common::MakeDirs(opts.data_dir + "/checkpoints"));
  return tls;
}

Result<std::unique_ptr<Server>> Server::Build(const ServerOptions& opts, const ServerStore& store) {
  if (store.database == nullptr) return common::InvalidArgument("a server needs a database");
  EMBODY_ASSIGN_OR_RETURN(tls, Prepare(opts));
  return Assemble(opts, store, std::move(tls), nullptr);
}

Result<std::unique_ptr<Server>> Server::Assemble(const ServerOptions& opts,
                                                 const ServerStore& store,
                                                 std::shared_ptr<const common::http::ServerTls> tls,
                                                 std::shared_ptr<void> owned) {
  auto m = std::make_unique<Impl>();
  m->owned = std::move(owned);
  m->store = store;
  m->opts = opts;
  m->watched =
      std::make_unique<service::PrincipalWatchedDatabase>(*store.database, m->principal_cache);
  m->database = std::make_unique<service::AuditedDatabase>(*m->watched);
  if (opts.auth_cache) {
    if (store.start_principal_feed) {
      store.start_principal_feed(m->principal_cache);
      m->principal_feed_started = true;
    } else {
      m->principal_cache.SetEnabled(true);
    }
  }

  auto boot = service::Bootstrap(*m->database, common::NowMillis());
  if (!boot.ok()) return boot.status();
  m->bootstrap = *boot;
  if (boot->created) {
    // Printed once, on the first start only: the server never sees the plain tokens again.
    std::printf("bootstrap: tenant=%s\nadmin token: %s\nagent token: %s\n", boot->tenant.c_str(),
                boot->admin_token.c_str(), boot->agent_token.c_str());
    std::fflush(stdout);
    if (!opts.bootstrap_out.empty()) {
      EMBODY_RETURN_IF_ERROR(WriteBootstrapFile(opts.bootstrap_out, *boot));
    }
  }

  Impl* raw = m.get();
  EMBODY_RETURN_IF_ERROR(m->WireServices());
  m->api = std::make_unique<http::ApiServer>(m->ApiDependencies(tls));
  auto port = m->api->Bind(opts.listen_host, opts.listen_port);
  if (!port.ok()) return port.status();
  m->port = *port;
  // Listening on every interface says nothing about where Prometheus reaches us: the route then
  // answers with the address Prometheus itself used (ApiDeps::advertise_address).
  const bool any_address =
      opts.listen_host == "0.0.0.0" || opts.listen_host == "::" || opts.listen_host == "[::]";
  if (!opts.advertise.empty()) {
    m->api->SetAdvertiseAddress(opts.advertise);
  } else if (!any_address) {
    const bool v6 =
        opts.listen_host.find(':') != std::string::npos && opts.listen_host.front() != '[';
    m->api->SetAdvertiseAddress((v6 ? "[" + opts.listen_host + "]" : opts.listen_host) + ":" +
                                std::to_string(m->port));
  }
  if (!opts.port_file.empty()) {
    EMBODY_RETURN_IF_ERROR(common::WriteFileAtomic(opts.port_file, std::to_string(m->port) + "\n"));
  }
  m->forecasts->Start();
  m->scheduler->Start();
  m->pipelines->Start();
  m->StartSweepers();
  m->serve_thread = std::thread([raw] { raw->api->Serve(); });
  if (!m->api->WaitUntilServing(10)) {
    m->api->Stop();
    m->serve_thread.join();
    m->scheduler->Stop();
    m->pipelines->Stop();
    m->StopSweepers();
    return common::Internal("HTTP server did not start");
  }
  common::LogInfo("listening", {{"host", opts.listen_host},
                                {"port", std::to_string(m->port)},
                                {"tls", tls ? "true" : "false"}});
  return std::unique_ptr<Server>(new Server(std::move(m)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { Stop(); }

int Server::port() const { return impl_->port; }

const service::BootstrapResult& Server::bootstrap() const { return impl_->bootstrap; }

void Server::Stop() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->waiters.Shutdown();  // held heartbeats answer now, not at the end of their wait
  impl_->api->Stop();
  if (impl_->serve_thread.joinable()) impl_->serve_thread.join();
  impl_->scheduler->Stop();
  impl_->pipelines->Stop();
  impl_->forecasts->Stop();
  impl_->StopSweepers();
  impl_->StopPrincipalFeed();
  common::LogInfo("stopped");
}

}  // namespace controlplane
