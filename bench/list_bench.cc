// Listing jobs with a large table: GET /v1/jobs?limit=N through the real HTTP server, with
// --jobs rows in the table, against the per-job way of loading a page, side by side.
//
//   list_bench [--jobs 100000] [--limit 1000] [--rounds 20]
//
// One private PostgreSQL cluster (tests/support/pg_harness.h) and one embody-server in this
// process. The jobs are inserted by one SQL statement (generate_series; a tenth of them carry a
// step event and an allocation, so a page has something to join). Each round times:
//   http:     GET /v1/jobs?limit=N as the cluster-admin (JSON rendering included), newest page
//             and a page deep in the table (cursor at half the ids);
//   batched:  the page loaded as the server does (JobsService::List: 4 statements per page);
//   per-job:  the same page loaded with LoadJobView per job (3 statements per job), the way
//             it was loaded before, in the same unit of work shape.
// Printed: p50/p99 of each, the ratio per-job / batched, and one JSON line.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <httplib.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "controlplane/db/pg.h"
#include "controlplane/db/stores.h"
#include "controlplane/server.h"
#include "controlplane/service/job_view.h"
#include "tests/support/pg_harness.h"

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double Ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "list_bench: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  int jobs = 100'000, limit = 1000, rounds = 20;
  CLI::App app{"GET /v1/jobs?limit=N with a large table: batched page loading vs per job"};
  app.add_option("--jobs", jobs, "jobs in the table")->check(CLI::Range(1000, 10'000'000));
  app.add_option("--limit", limit, "page size")->check(CLI::Range(1, 1000));
  app.add_option("--rounds", rounds, "timed rounds")->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);

  embody::testing::PgCluster pg;
  if (common::Status st = pg.Start(); !st.ok()) return Fail(st.ToString());
  auto dbinfo = pg.CreateDatabase("list_bench");
  if (!dbinfo.ok()) return Fail(dbinfo.status().ToString());
  std::string tmpl = "/tmp/embody-list-bench-XXXXXX";
  const std::string dir = mkdtemp(tmpl.data());
  const int saved_stderr = dup(STDERR_FILENO);
  const int log_fd = open((dir + "/server.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  dup2(log_fd, STDERR_FILENO);  // the server's request log, as a journal would take it

  controlplane::ServerOptions so;
  so.db = *dbinfo;
  so.data_dir = dir + "/data";
  so.bootstrap_out = dir + "/bootstrap.json";
  so.scheduler_period_ms = 600'000;
  so.audit = false;
  auto server = controlplane::Server::Start(so);
  dup2(saved_stderr, STDERR_FILENO);
  if (!server.ok()) return Fail(server.status().ToString());
  const int port = (*server)->port();
  const std::string admin = (*server)->bootstrap().admin_token;

  auto pool = controlplane::db::PgPool::Open(*dbinfo, 2);
  if (!pool.ok()) return Fail(pool.status().ToString());
  {
    auto lease = (*pool)->Acquire();
    if (!lease.ok()) return Fail(lease.status().ToString());
    const std::string n = std::to_string(jobs);
    const std::string fill =
        "INSERT INTO nodes (name, address, agent_url, cpu_slots, memory_bytes, gpus,"
        " last_heartbeat, state) VALUES ('bench', '127.0.0.1', '', 64, 0, '[]', now(), 'UP');"
        "INSERT INTO jobs (tenant_id, name, kind, state, priority, spec, created_at, updated_at)"
        " SELECT (SELECT min(id) FROM tenants), 'job-' || g, 'command',"
        " CASE WHEN g % 10 = 0 THEN 'RUNNING' ELSE 'SUCCEEDED' END, 50,"
        " '{\"name\":\"j\",\"kind\":\"command\",\"command\":[\"true\"],"
        "\"resources\":{\"nodes\":1}}'::jsonb, now(), now() FROM generate_series(1, " + n + ") g;"
        "INSERT INTO job_allocations (job_id, node_id, ranks, slots, slot_type, is_head, launched,"
        " released) SELECT id, (SELECT min(id) FROM nodes), 1, 1, 'cpu', true, true,"
        " state <> 'RUNNING' FROM jobs WHERE id % 10 = 0;"
        "INSERT INTO job_events (job_id, time, type, data, step) SELECT id, now(), 'step',"
        " '{\"step\":5,\"loss\":0.5}'::jsonb, 5 FROM jobs WHERE id % 10 = 0;"
        "ANALYZE;";
    if (auto st = controlplane::db::ExecScript(lease->get(), fill); !st.ok()) {
      return Fail("fill: " + st.ToString());
    }
  }

  int64_t max_id = 0;
  controlplane::db::PgDatabase database(**pool);
  {
    auto uow = database.Begin();
    controlplane::service::JobQuery q;
    q.limit = 1;
    auto newest = (*uow)->jobs().List(q);
    if (!newest.ok() || newest->empty()) return Fail("no jobs");
    max_id = newest->front().id;
  }
  const std::string deep = std::to_string(max_id / 2);

  httplib::Client cli("127.0.0.1", port);
  cli.set_keep_alive(true);
  httplib::Headers auth{{"Authorization", "Bearer " + admin}};
  std::vector<double> http_new, http_deep, batched, per_job;
  size_t bytes = 0;
  for (int r = 0; r < rounds + 2; ++r) {  // two untimed rounds first
    const bool timed = r >= 2;
    auto t0 = Clock::now();
    auto a = cli.Get("/v1/jobs?limit=" + std::to_string(limit), auth);
    auto t1 = Clock::now();
    auto b = cli.Get("/v1/jobs?limit=" + std::to_string(limit) + "&cursor=" + deep, auth);
    auto t2 = Clock::now();
    if (!a || a->status != 200 || !b || b->status != 200) return Fail("GET /v1/jobs failed");
    if (json::parse(a->body)["jobs"].size() != static_cast<size_t>(limit)) {
      return Fail("short page");
    }
    bytes = a->body.size();

    controlplane::service::JobQuery q;
    q.limit = limit;
    auto t3 = Clock::now();
    {
      auto uow = database.Begin();
      auto page = (*uow)->jobs().List(q);
      auto views = controlplane::service::LoadJobViews(**uow, std::move(*page));
      if (!views.ok()) return Fail(views.status().ToString());
    }
    auto t4 = Clock::now();
    {
      auto uow = database.Begin();
      auto page = (*uow)->jobs().List(q);
      for (auto& j : *page) {
        auto v = controlplane::service::LoadJobView(**uow, std::move(j));
        if (!v.ok()) return Fail(v.status().ToString());
      }
    }
    auto t5 = Clock::now();
    if (!timed) continue;
    http_new.push_back(Ms(t0, t1));
    http_deep.push_back(Ms(t1, t2));
    batched.push_back(Ms(t3, t4));
    per_job.push_back(Ms(t4, t5));
  }
  const double ratio = Percentile(per_job, 0.5) / Percentile(batched, 0.5);
  std::printf("list_bench: %d jobs in the table, pages of %d, %d rounds, %zu bytes per page\n",
              jobs, limit, rounds, bytes);
  std::printf("  GET /v1/jobs newest page   p50 %7.1f ms  p99 %7.1f ms\n",
              Percentile(http_new, 0.5), Percentile(http_new, 0.99));
  std::printf("  GET /v1/jobs deep page     p50 %7.1f ms  p99 %7.1f ms\n",
              Percentile(http_deep, 0.5), Percentile(http_deep, 0.99));
  std::printf("  page load, batched         p50 %7.1f ms  p99 %7.1f ms\n",
              Percentile(batched, 0.5), Percentile(batched, 0.99));
  std::printf("  page load, per job         p50 %7.1f ms  p99 %7.1f ms\n",
              Percentile(per_job, 0.5), Percentile(per_job, 0.99));
  std::printf("  per job / batched: %.1fx\n", ratio);
  std::printf("{\"bench\":\"list\",\"jobs\":%d,\"limit\":%d,\"http_p50_ms\":%.2f,"
              "\"http_p99_ms\":%.2f,\"http_deep_p50_ms\":%.2f,\"batched_p50_ms\":%.2f,"
              "\"per_job_p50_ms\":%.2f,\"ratio\":%.2f}\n",
              jobs, limit, Percentile(http_new, 0.5), Percentile(http_new, 0.99),
              Percentile(http_deep, 0.5), Percentile(batched, 0.5), Percentile(per_job, 0.5),
              ratio);
  (*server)->Stop();
  return 0;
}
