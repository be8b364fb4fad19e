// Listing jobs with a large table: GET /v1/jobs?limit=N (and ?state=S) through the real HTTP
// server, with --jobs rows in the table, against the per-job way of loading a page, side by side.
//
//   list_bench [--jobs 100000] [--limit 1000] [--rounds 20] [--state SUCCEEDED --state PENDING]
//              [--explain]
//
// One private PostgreSQL cluster (tests/support/pg_harness.h) and one embody-server in this
// process. The jobs are inserted by one SQL statement (generate_series) in a mix of states
// (of every 100: 84 SUCCEEDED, 8 FAILED, 4 CANCELLED, 2 RUNNING, 2 PENDING; the finished ones
// with start and finish times and an exit code); a tenth of them carry a step event and an
// allocation, so a page has something to join. Each round times:
//   http:     GET /v1/jobs?limit=N as the cluster-admin (JSON rendering included), newest page
//             and a page deep in the table (cursor at half the ids); the same with each --state;
//   batched:  the page loaded as the server does (JobsService::List: 4 statements per page),
//             and each of those statements alone;
//   per-job:  the same page loaded with LoadJobView per job (3 statements per job), the way
//             it was loaded before, in the same unit of work shape;
//   convert:  that page made into the API's views (JobOf, api/v1/job.h), as the route does;
//   render:   those written as the body of the response, as a tree of nlohmann objects
//             dumped at the end (before) and row by row with AppendJson (now).
// --explain prints EXPLAIN ANALYZE of the list statement for those pages first.
// Printed: p50/p99 of each, the ratios per-job / batched and tree / rows, and one JSON line.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <httplib.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "api/v1/job.h"
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
  std::vector<std::string> states{"SUCCEEDED", "PENDING"};
  bool explain = false;
  CLI::App app{"GET /v1/jobs?limit=N with a large table: batched page loading vs per job"};
  app.add_option("--jobs", jobs, "jobs in the table")->check(CLI::Range(1000, 10'000'000));
  app.add_option("--limit", limit, "page size")->check(CLI::Range(1, 1000));
  app.add_option("--rounds", rounds, "timed rounds")->check(CLI::Range(1, 1000));
  app.add_option("--state", states, "also time pages of jobs in this state (repeatable)")
      ->check(CLI::IsMember({"PENDING", "SCHEDULED", "RUNNING", "SUCCEEDED", "FAILED",
                             "CANCELLED"}));
  app.add_flag("--explain", explain, "print the list statement's plans first");
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
        // DOWN: the scheduler leaves the PENDING jobs where they are.
        "INSERT INTO nodes (name, address, agent_url, cpu_slots, memory_bytes, gpus,"
        " last_heartbeat, state) VALUES ('bench', '127.0.0.1', '', 64, 0, '[]', now(), 'DOWN');"
        "INSERT INTO jobs (tenant_id, name, kind, state, priority, spec, exit_code, created_at,"
        " updated_at, started_at, finished_at)"
        " SELECT (SELECT min(id) FROM tenants), 'job-' || g, 'command', s.state, 50,"
        " '{\"name\":\"j\",\"kind\":\"command\",\"command\":[\"true\"],"
        "\"resources\":{\"nodes\":1}}'::jsonb,"
        " CASE s.state WHEN 'SUCCEEDED' THEN 0 WHEN 'FAILED' THEN 1 END, now(), now(),"
        " CASE WHEN s.state IN ('SUCCEEDED', 'FAILED', 'RUNNING') THEN now() END,"
        " CASE WHEN s.state IN ('SUCCEEDED', 'FAILED', 'CANCELLED') THEN now() END"
        " FROM generate_series(1, " + n + ") g, LATERAL (SELECT CASE"
        " WHEN g % 100 < 84 THEN 'SUCCEEDED' WHEN g % 100 < 92 THEN 'FAILED'"
        " WHEN g % 100 < 96 THEN 'CANCELLED' WHEN g % 100 < 98 THEN 'RUNNING'"
        " ELSE 'PENDING' END AS state) s;"
        "INSERT INTO job_allocations (job_id, node_id, ranks, slots, slot_type, is_head, launched,"
        " released) SELECT id, (SELECT min(id) FROM nodes), 1, 1, 'cpu', true, true,"
        " state <> 'RUNNING' FROM jobs WHERE id % 10 = 0;"
        "INSERT INTO job_events (job_id, time, type, data, step) SELECT id, now(), 'step',"
        " '{\"step\":5,\"loss\":0.5}'::jsonb, 5 FROM jobs WHERE id % 10 = 0;"
        "ANALYZE;";
    const auto f0 = Clock::now();
    if (auto st = controlplane::db::ExecScript(lease->get(), fill); !st.ok()) {
      return Fail("fill: " + st.ToString());
    }
    std::printf("list_bench: %d jobs inserted and analysed in %.1f s\n", jobs,
                Ms(f0, Clock::now()) / 1000);
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

  if (explain) {
    // The statement JobsService::List runs, for the pages timed below: as the cluster-admin
    // (no tenant) and, for each state, as a member of the tenant would ask.
    auto lease = (*pool)->Acquire();
    if (!lease.ok()) return Fail(lease.status().ToString());
    auto tenant = controlplane::db::Exec(lease->get(), "SELECT min(id) AS id FROM tenants");
    if (!tenant.ok()) return Fail(tenant.status().ToString());
    const std::string tenant_id = std::to_string(tenant->Int(0, "id"));
    using controlplane::db::Param;
    auto show = [&](const std::string& title, Param tenant, Param state, Param before) -> bool {
      auto r = controlplane::db::Exec(
          lease->get(), "EXPLAIN (ANALYZE, COSTS OFF) " + controlplane::db::JobListSql(),
          {tenant, state, before, std::to_string(limit + 1), std::nullopt});
      if (!r.ok()) return false;
      std::printf("-- %s\n", title.c_str());
      for (size_t i = 0; i < r->size(); ++i) {
        std::printf("   %s\n", r->Str(i, "QUERY PLAN").c_str());
      }
      return true;
    };
    bool ok = show("all states, newest page", {}, {}, {}) &&
              show("all states, deep page", {}, {}, deep);
    for (const std::string& st : states) {
      ok = ok && show("state " + st + ", newest page", {}, st, {}) &&
           show("state " + st + ", deep page", {}, st, deep) &&
           show("state " + st + ", newest page of one tenant", tenant_id, st, {});
    }
    if (!ok) return Fail("EXPLAIN failed");
  }

  httplib::Client cli("127.0.0.1", port);
  cli.set_keep_alive(true);
  httplib::Headers auth{{"Authorization", "Bearer " + admin}};
  // One GET of a page; "" when it is as expected (200, rows in `state` when one is given, a
  // full page when `full`), else what is wrong.
  size_t bytes = 0;
  auto get = [&](const std::string& query, const std::string& state, bool full,
                 double* ms) -> std::string {
    const auto t0 = Clock::now();
    auto r = cli.Get("/v1/jobs?limit=" + std::to_string(limit) + query, auth);
    *ms = Ms(t0, Clock::now());
    if (!r || r->status != 200) return "GET /v1/jobs" + query + " failed";
    const json page = json::parse(r->body);
    if (page["jobs"].empty() || (full && page["jobs"].size() != static_cast<size_t>(limit))) {
      return "short page for " + query;
    }
    for (const json& j : page["jobs"]) {
      if (!state.empty() && j["state"] != state) {
        return "a " + j["state"].dump() + " job in " + query;
      }
    }
    if (query.empty()) bytes = r->body.size();
    return "";
  };
  std::vector<double> http_new, http_deep, batched, per_job, convert, render_tree, render_rows;
  std::vector<double> part_jobs, part_allocs, part_steps, part_ckpts;
  std::map<std::string, std::vector<double>> state_new, state_deep;
  size_t tree_bytes = 0, rows_bytes = 0;
  for (int r = 0; r < rounds + 2; ++r) {  // two untimed rounds first
    const bool timed = r >= 2;
    double a = 0, b = 0;
    std::string bad = get("", "", true, &a);
    if (bad.empty()) bad = get("&cursor=" + deep, "", true, &b);
    if (!bad.empty()) return Fail(bad);
    if (timed) {
      http_new.push_back(a);
      http_deep.push_back(b);
    }
    for (const std::string& st : states) {
      bad = get("&state=" + st, st, false, &a);
      if (bad.empty()) bad = get("&state=" + st + "&cursor=" + deep, st, false, &b);
      if (!bad.empty()) return Fail(bad);
      if (timed) {
        state_new[st].push_back(a);
        state_deep[st].push_back(b);
      }
    }

    controlplane::service::JobQuery q;
    q.limit = limit;
    std::vector<controlplane::service::JobView> views;
    auto t3 = Clock::now();
    {
      auto uow = database.Begin();
      auto page = (*uow)->jobs().List(q);
      auto loaded = controlplane::service::LoadJobViews(**uow, std::move(*page));
      if (!loaded.ok()) return Fail(loaded.status().ToString());
      views = std::move(*loaded);
    }
    auto t4 = Clock::now();
    {  // the batched load's statements one by one: where its time goes
      auto uow = database.Begin();
      std::vector<int64_t> ids;
      auto s0 = Clock::now();
      auto page = (*uow)->jobs().List(q);
      auto s1 = Clock::now();
      for (const auto& j : *page) ids.push_back(j.id);
      auto allocs = (*uow)->allocations().PlacementForJobs(ids);
      auto s2 = Clock::now();
      auto steps = (*uow)->events().LatestOfJobs(ids, "step");
      auto s3 = Clock::now();
      auto ckpts = (*uow)->events().LatestCheckpoints(ids);
      auto s4 = Clock::now();
      if (!allocs.ok() || !steps.ok() || !ckpts.ok()) return Fail("page statements failed");
      if (timed) {
        part_jobs.push_back(Ms(s0, s1));
        part_allocs.push_back(Ms(s1, s2));
        part_steps.push_back(Ms(s2, s3));
        part_ckpts.push_back(Ms(s3, s4));
      }
    }
    const auto t4b = Clock::now();
    {
      auto uow = database.Begin();
      auto page = (*uow)->jobs().List(q);
      for (auto& j : *page) {
        auto v = controlplane::service::LoadJobView(**uow, std::move(j));
        if (!v.ok()) return Fail(v.status().ToString());
      }
    }
    auto t5 = Clock::now();
    // The page as the route writes it: the views made into the API's (moved, not copied),
    // then written by its codec.
    api::v1::JobList list;
    list.jobs.reserve(views.size());
    for (auto& v : views) list.jobs.push_back(controlplane::service::JobOf(std::move(v)));
    const auto t5b = Clock::now();
    std::string tree;
    {  // the route before: a tree of objects, dumped at the end
      tree = api::v1::ToJson(list).dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
    }
    auto t6 = Clock::now();
    std::string rows;  // the route now: row by row
    rows.reserve(512 * (list.jobs.size() + 1));
    api::v1::AppendJson(list, rows);
    rows += '\n';
    auto t7 = Clock::now();
    if (rows != tree) return Fail("the page written row by row differs from the tree's dump");
    tree_bytes = tree.size();
    rows_bytes = rows.size();
    if (!timed) continue;
    batched.push_back(Ms(t3, t4));
    per_job.push_back(Ms(t4b, t5));
    convert.push_back(Ms(t5, t5b));
    render_tree.push_back(Ms(t5b, t6));
    render_rows.push_back(Ms(t6, t7));
  }
  const double ratio = Percentile(per_job, 0.5) / Percentile(batched, 0.5);
  const double render_ratio = Percentile(render_tree, 0.5) / Percentile(render_rows, 0.5);
  auto line = [](const std::string& what, const std::vector<double>& v) {
    std::printf("  %-40s p50 %7.1f ms  p99 %7.1f ms\n", what.c_str(), Percentile(v, 0.5),
                Percentile(v, 0.99));
  };
  std::printf("list_bench: %d jobs in the table, pages of %d, %d rounds, %zu bytes per page\n",
              jobs, limit, rounds, bytes);
  line("GET /v1/jobs newest page", http_new);
  line("GET /v1/jobs deep page", http_deep);
  for (const std::string& st : states) {
    line("GET /v1/jobs?state=" + st + " newest", state_new[st]);
    line("GET /v1/jobs?state=" + st + " deep", state_deep[st]);
  }
  line("page load, batched", batched);
  line("  of which the jobs", part_jobs);
  line("  of which their placements", part_allocs);
  line("  of which their latest steps", part_steps);
  line("  of which their latest checkpoints", part_ckpts);
  line("page load, per job", per_job);
  line("page made into api::v1::Job", convert);
  line("page written as a tree (before)", render_tree);
  line("page written row by row (now)", render_rows);
  std::printf("  per job / batched: %.1fx; tree / rows: %.1fx (%zu bytes, identical: %s)\n",
              ratio, render_ratio, rows_bytes, rows_bytes == tree_bytes ? "yes" : "no");
  std::string state_fields;
  for (const std::string& st : states) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), ",\"state_%s_p50_ms\":%.2f,\"state_%s_deep_p50_ms\":%.2f",
                  st.c_str(), Percentile(state_new[st], 0.5), st.c_str(),
                  Percentile(state_deep[st], 0.5));
    state_fields += buf;
  }
  std::printf("{\"bench\":\"list\",\"jobs\":%d,\"limit\":%d,\"http_p50_ms\":%.2f,"
              "\"http_p99_ms\":%.2f,\"http_deep_p50_ms\":%.2f%s,\"batched_p50_ms\":%.2f,"
              "\"per_job_p50_ms\":%.2f,\"ratio\":%.2f,\"convert_p50_ms\":%.2f,"
              "\"render_tree_p50_ms\":%.2f,"
              "\"render_rows_p50_ms\":%.2f,\"render_ratio\":%.2f}\n",
              jobs, limit, Percentile(http_new, 0.5), Percentile(http_new, 0.99),
              Percentile(http_deep, 0.5), state_fields.c_str(), Percentile(batched, 0.5),
              Percentile(per_job, 0.5), ratio, Percentile(convert, 0.5),
              Percentile(render_tree, 0.5),
              Percentile(render_rows, 0.5), render_ratio);
  (*server)->Stop();
  return 0;
}
