// Submissions per second through the real HTTP server: what tenancy's guards cost POST /v1/jobs
// (--compare guards), what the submission batcher gains (--compare batch), or what keeping
// authenticated tokens in memory gains (--compare auth).
//
//   submit_bench [--compare guards|batch|auth] [--clients 8] [--seconds 5] [--pairs 2] [--warmup 1]
//                [--scheduler-period-ms N] [--guarded-audit 1] [--guarded-rate-limit 1]
//                [--guarded-quota 1] [--batch-window-us 1000] [--batch-max 256] [--auth-cache 1]
//                [--pg-set name=value]... [--profile 200]
//
// One private PostgreSQL cluster (tests/support/pg_harness.h), two databases in it, and two
// embody-servers in this process, one per database:
//   guarded: audit on, a per-token rate limit set high (--rate-limit-per-s 1000000, burst the
//            same) and the tenant's pending-jobs quota set high (1e9);
//   bare:    audit off, no rate limit, no quota.
// With --compare batch the two are both guarded, and differ only in the submission batcher
// (controlplane/service/submit_batcher.h):
//   batched:   --submit-batch-window-us --batch-window-us, --submit-batch-max --batch-max;
//   unbatched: window 0, one transaction per submission, on its request's thread (the
//              baseline).
// With --compare auth the two are both guarded and batched as above, and differ only in
// --auth-cache (controlplane/service/principal_cache.h):
//   cached:   a token is read from the database once, then answered from memory;
//   uncached: every request reads its token in a transaction of its own (the baseline).
// Both authenticate every request (a member token of the default tenant) and validate and store
// the job as always. Each server has one node with 64 slots, drained, so every job is admissible
// and stays PENDING: what is measured is admission and storage, not the scheduler, whose loop is
// slowed to one pass per --scheduler-period-ms (default 600 s) on both.
//
// N client threads, each with its own keep-alive connection, POST jobs back to back for
// --seconds; the servers take turns in ABBA order (guarded, bare, bare, guarded, ...) so a drift
// of the machine's load hits both alike, after a --warmup round on each. Printed: per round and
// per server the submissions/s and the p50/p99 latency over all its rounds, the ratio of the
// first to the second (guards: at least 0.9; batch: the batched server against issue 11's goal
// of 2,000/s with p99 < 50 ms), CPU per submission, and one JSON line; then (--profile) the statements of a submission
// to each server and PostgreSQL's time in each. The servers' log lines go to a file in the temp
// directory, as a real server's go to its journal.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/time_util.h"
#include "controlplane/server.h"
#include "tests/support/pg_harness.h"

namespace {

using nlohmann::json;

struct Options {
  std::string compare = "guards";  // or "batch", "auth"
  int batch_window_us = 1000;
  int batch_max = 256;
  int clients = 8;
  double seconds = 5;
  int pairs = 2;
  double warmup = 1;
  int scheduler_period_ms = 600'000;
  int rate_limit_per_s = 1'000'000;
  // Which guards the guarded server has (all by default): to see what each one costs.
  bool guarded_audit = true;
  bool guarded_rate_limit = true;
  bool guarded_quota = true;
  // PostgreSQL settings (name=value) made with ALTER SYSTEM before the servers start: to compare
  // e.g. commit_delay or synchronous_commit on the same bench.
  std::vector<std::string> pg_set;
  int profile = 200;  // submissions per server in the statement profile after the rounds; 0: none
  // --auth-cache of both servers with --compare guards|batch (auth compares 1 with 0).
  bool auth_cache = true;
};

// CPU seconds used so far by this process (servers and clients) and by the PostgreSQL cluster
// (the postmaster's children: backends, WAL writer, checkpointer). Unlike throughput these do
// not move when other processes share the machine.
struct Cpu {
  double self_s = 0;
  double pg_s = 0;
};

struct Target {
  std::string name;
  std::unique_ptr<controlplane::Server> server;
  std::string token;                // a member of the default tenant
  std::vector<double> latencies_s;  // every timed request
  double busy_s = 0;                // time under load
  Cpu cpu;                          // used under load
  int64_t submitted = 0;
  int64_t failed = 0;
  std::string first_failure;  // status and body of the first failed request
};

double ProcessCpuSeconds(const std::string& stat_path) {
  std::ifstream in(stat_path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos) return 0;
  std::istringstream fields(text.substr(paren + 2));
  std::vector<std::string> f((std::istream_iterator<std::string>(fields)),
                             std::istream_iterator<std::string>());
  // After "pid (comm) ": state ppid ... utime is field 14 of the line, index 11 here.
  if (f.size() < 13) return 0;
  return (std::stod(f[11]) + std::stod(f[12])) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

int64_t ParentOf(const std::string& stat_path) {
  std::ifstream in(stat_path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos) return -1;
  std::istringstream fields(text.substr(paren + 2));
  std::string state;
  int64_t ppid = -1;
  fields >> state >> ppid;
  return ppid;
}

Cpu SampleCpu(int64_t postmaster) {
  Cpu c;
  c.self_s = ProcessCpuSeconds("/proc/self/stat");
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    const std::string stat = e.path().string() + "/stat";
    if (std::stoll(name) == postmaster || ParentOf(stat) == postmaster) {
      c.pg_s += ProcessCpuSeconds(stat);
    }
  }
  return c;
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "submit_bench: %s\n", what.c_str());
  return 1;
}

httplib::Result Call(int port, const std::string& method, const std::string& path,
                     const std::string& token, const std::string& body,
                     httplib::Headers headers = {}) {
  httplib::Client cli("127.0.0.1", port);
  headers.emplace("Authorization", "Bearer " + token);
  if (method == "PATCH") return cli.Patch(path, headers, body, "application/json");
  return cli.Post(path, headers, body, "application/json");
}

// Starts a server on its own database and prepares what every submission needs; `batch_window_us`
// > 0 turns the submission batcher on.
common::Status Start(const embody::testing::PgCluster& pg, const std::string& dir, const Options& o,
                     const std::string& name, bool guarded, int batch_window_us, bool auth_cache,
                     Target* t) {
  t->name = name;
  auto db = pg.CreateDatabase("bench_" + t->name);
  if (!db.ok()) return db.status();
  controlplane::ServerOptions so;
  so.db = *db;
  so.data_dir = dir + "/" + t->name;
  so.bootstrap_out = dir + "/" + t->name + "-bootstrap.json";
  so.scheduler_period_ms = o.scheduler_period_ms;
  so.audit = guarded && o.guarded_audit;
  so.rate_limit_per_s = guarded && o.guarded_rate_limit ? o.rate_limit_per_s : 0;
  so.rate_limit_burst = so.rate_limit_per_s;
  so.submit_batch_window_us = batch_window_us;
  so.submit_batch_max = o.batch_max;
  so.auth_cache = auth_cache ? 1 : 0;
  auto server = controlplane::Server::Start(so);
  if (!server.ok()) return server.status();
  t->server = std::move(*server);
  const int port = t->server->port();
  const std::string admin = t->server->bootstrap().admin_token;

  auto reg = Call(port, "POST", "/v1/agents/register", t->server->bootstrap().agent_token,
                  json{{"name", "parked"}, {"address", "127.0.0.1"}, {"cpu_slots", 64}}.dump());
  if (!reg || reg->status != 200) return common::Internal("register failed");
  const int64_t node = json::parse(reg->body).value("node_id", int64_t{0});
  auto drain = Call(port, "POST", "/v1/nodes/" + std::to_string(node) + "/drain", admin, "");
  if (!drain || drain->status != 200) return common::Internal("drain failed");

  auto tok =
      Call(port, "POST", "/v1/tokens", admin, json{{"role", "member"}, {"name", "bench"}}.dump());
  if (!tok || tok->status != 201) return common::Internal("token failed");
  const json tj = json::parse(tok->body);
  t->token = tj.value("token", "");
  if (guarded && o.guarded_quota) {
    const std::string tenant = std::to_string(tj.value("tenant_id", int64_t{0}));
    auto patch =
        Call(port, "PATCH", "/v1/tenants/" + tenant, admin,
             json{{"quota", {{"pending_jobs", 1'000'000'000}}}}.dump(), {{"If-Match", "*"}});
    if (!patch || patch->status != 200) {
      return common::Internal("quota failed: " + (patch ? patch->body : std::string("no answer")));
    }
  }
  return common::Status::Ok();
}

// One round: `clients` threads submit back to back for `seconds`. Returns submissions/s.
double Round(const Options& o, double seconds, bool timed, int64_t postmaster, Target* t) {
  const std::string body = json{{"name", "bench"},
                                {"kind", "command"},
                                {"command", {"true"}},
                                {"resources", {{"nodes", 1}, {"ranks_per_node", 64}}}}
                               .dump();
  std::atomic<bool> stop{false};
  std::vector<std::vector<double>> lat(o.clients);
  std::vector<int64_t> ok(o.clients, 0), bad(o.clients, 0);
  std::mutex mu;
  std::string first_failure;
  std::vector<std::thread> threads;
  const Cpu cpu0 = SampleCpu(postmaster);
  const double start = common::MonotonicSeconds();
  for (int c = 0; c < o.clients; ++c) {
    threads.emplace_back([&, c] {
      httplib::Client cli("127.0.0.1", t->server->port());
      cli.set_keep_alive(true);
      cli.set_tcp_nodelay(true);
      const httplib::Headers h = {{"Authorization", "Bearer " + t->token}};
      while (!stop.load(std::memory_order_relaxed)) {
        const double t0 = common::MonotonicSeconds();
        auto res = cli.Post("/v1/jobs", h, body, "application/json");
        const double dt = common::MonotonicSeconds() - t0;
        if (res && res->status == 201) {
          ++ok[c];
          lat[c].push_back(dt);
        } else {
          ++bad[c];
          std::lock_guard<std::mutex> lock(mu);
          if (first_failure.empty()) {
            first_failure = res ? std::to_string(res->status) + " " + res->body
                                : "no answer: " + httplib::to_string(res.error());
          }
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& th : threads) th.join();
  const double elapsed = common::MonotonicSeconds() - start;
  const Cpu cpu1 = SampleCpu(postmaster);
  int64_t n = 0;
  for (int c = 0; c < o.clients; ++c) {
    n += ok[c];
    if (timed) {
      t->latencies_s.insert(t->latencies_s.end(), lat[c].begin(), lat[c].end());
      t->failed += bad[c];
    }
  }
  if (timed && t->first_failure.empty()) t->first_failure = first_failure;
  if (timed) {
    t->submitted += n;
    t->busy_s += elapsed;
    t->cpu.self_s += cpu1.self_s - cpu0.self_s;
    t->cpu.pg_s += cpu1.pg_s - cpu0.pg_s;
  }
  return n / elapsed;
}

// ALTER SYSTEM for each name=value and a reload. One psql call each: ALTER SYSTEM refuses to
// run inside the transaction that several statements of one -c would share.
common::Status SetPg(const embody::testing::PgCluster& pg,
                     const std::vector<std::pair<std::string, std::string>>& settings, bool reset) {
  for (const auto& [name, value] : settings) {
    for (char c : name) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.') {
        return common::InvalidArgument("bad setting name " + name);
      }
    }
    std::string quoted;
    for (char c : value) quoted += c == '\'' ? std::string("''") : std::string(1, c);
    auto r = pg.Psql(reset ? "ALTER SYSTEM RESET " + name
                           : "ALTER SYSTEM SET " + name + " = '" + quoted + "'");
    if (!r.ok()) return r.status();
  }
  auto r = pg.Psql("SELECT pg_reload_conf()");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the backends' SIGHUP
  return r.status();
}

// Where PostgreSQL's time goes per submission: every statement is logged with its duration
// (log_min_duration_statement = 0, each line prefixed with its database) while one client submits
// `n` jobs to each server in turn; the lines of each server's database are then grouped by
// statement text. Durations are the backend's wall time (parse + bind + execute), so COMMIT
// includes its WAL flush; one client, so nothing waits on another's lock.
void ProfileStatements(const embody::testing::PgCluster& pg, int n, std::vector<Target*> targets) {
  const std::vector<std::pair<std::string, std::string>> logging = {
      {"log_min_duration_statement", "0"}, {"log_line_prefix", "%d|"}};
  if (!SetPg(pg, logging, false).ok()) return;
  const std::string log_path = pg.dir() + "/postgres.log";
  const auto offset = std::filesystem::file_size(log_path);
  const std::string body = json{{"name", "profiled"},
                                {"kind", "command"},
                                {"command", {"true"}},
                                {"resources", {{"nodes", 1}, {"ranks_per_node", 64}}}}
                               .dump();
  for (Target* t : targets) {
    httplib::Client cli("127.0.0.1", t->server->port());
    cli.set_keep_alive(true);
    const httplib::Headers h = {{"Authorization", "Bearer " + t->token}};
    for (int i = 0; i < n; ++i) cli.Post("/v1/jobs", h, body, "application/json");
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the log's last lines
  (void)SetPg(pg, logging, true);
  std::ifstream in(log_path);
  in.seekg(static_cast<std::streamoff>(offset));
  struct Stat {
    int64_t executed = 0;
    double ms = 0;
  };
  for (Target* t : targets) {
    in.clear();
    in.seekg(static_cast<std::streamoff>(offset));
    const std::string prefix = "bench_" + t->name + "|";
    std::map<std::string, Stat> by_text;
    int64_t statements = 0;
    double total_ms = 0;
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind(prefix, 0) != 0) continue;
      const size_t d = line.find("duration: ");
      if (d == std::string::npos) continue;
      const double ms = std::atof(line.c_str() + d + 10);
      const size_t phase = line.find(" ms  ", d);
      if (phase == std::string::npos) continue;
      const std::string rest = line.substr(phase + 5);
      const size_t colon = rest.find(": ");
      if (colon == std::string::npos) continue;
      const bool executed = rest.rfind("execute", 0) == 0 || rest.rfind("statement", 0) == 0;
      Stat& s = by_text[rest.substr(colon + 2, 72)];
      s.ms += ms;
      total_ms += ms;
      if (executed) {
        ++s.executed;
        ++statements;
      }
    }
    std::printf(
        "%s: %.1f statements and %.3f ms of PostgreSQL time per submission (%d, one client)\n",
        t->name.c_str(), static_cast<double>(statements) / n, total_ms / n, n);
    std::vector<std::pair<std::string, Stat>> rows(by_text.begin(), by_text.end());
    std::sort(rows.begin(), rows.end(),
              [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
    for (const auto& [text, s] : rows) {
      std::printf("  %5.2f/sub %7.1f us/sub  %s\n", static_cast<double>(s.executed) / n,
                  1e3 * s.ms / n, text.c_str());
    }
  }
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5))];
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Submissions/s through embody-server: audit, rate limit and quota on vs off, or "
               "the submission batcher on vs off"};
  app.add_option("--compare", o.compare,
                 "guards: guarded vs bare; batch: both guarded, batcher on vs off; auth: both "
                 "guarded and batched, --auth-cache 1 vs 0")
      ->check(CLI::IsMember({"guards", "batch", "auth"}));
  app.add_option("--batch-window-us", o.batch_window_us, "the batched server's window (batch)")
      ->check(CLI::Range(1, 100000));
  app.add_option("--batch-max", o.batch_max, "the batched server's largest batch (batch)")
      ->check(CLI::Range(1, 10000));
  app.add_option("--clients", o.clients, "concurrent clients")->check(CLI::Range(1, 256));
  app.add_option("--seconds", o.seconds, "length of one timed round")->check(CLI::PositiveNumber);
  app.add_option("--pairs", o.pairs, "ABBA pairs of timed rounds per server")
      ->check(CLI::Range(1, 100));
  app.add_option("--warmup", o.warmup, "seconds of untimed load per server first");
  app.add_option("--scheduler-period-ms", o.scheduler_period_ms, "scheduler pass period")
      ->check(CLI::PositiveNumber);
  app.add_option("--rate-limit-per-s", o.rate_limit_per_s, "the guarded server's rate limit")
      ->check(CLI::PositiveNumber);
  app.add_option("--guarded-audit", o.guarded_audit, "the guarded server writes audit rows");
  app.add_option("--guarded-rate-limit", o.guarded_rate_limit, "the guarded server rate-limits");
  app.add_option("--guarded-quota", o.guarded_quota, "the guarded tenant has a pending quota");
  app.add_option("--auth-cache", o.auth_cache,
                 "both servers keep authenticated tokens in memory (guards, batch)");
  app.add_option("--pg-set", o.pg_set, "a PostgreSQL setting name=value (repeatable)");
  app.add_option("--profile", o.profile,
                 "submissions per server whose statements are logged and grouped; 0: none")
      ->check(CLI::Range(0, 100000));
  CLI11_PARSE(app, argc, argv);

  embody::testing::PgCluster pg;
  if (common::Status st = pg.Start(); !st.ok()) return Fail(st.ToString());
  std::vector<std::pair<std::string, std::string>> settings;
  for (const std::string& kv : o.pg_set) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) return Fail("--pg-set wants name=value, not " + kv);
    settings.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  if (common::Status st = SetPg(pg, settings, false); !st.ok()) return Fail(st.ToString());
  std::string tmpl = "/tmp/embody-submit-bench-XXXXXX";
  const std::string dir = mkdtemp(tmpl.data());
  // The servers log every request, as in production, to a file rather than over this output.
  const std::string log_path = dir + "/server.log";
  const int saved_stderr = dup(STDERR_FILENO);
  const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  dup2(log_fd, STDERR_FILENO);

  // `guarded` is the first of the pair, `bare` the baseline it is divided by.
  const bool batch = o.compare == "batch";
  const bool auth = o.compare == "auth";
  Target guarded, bare;
  common::Status st;
  if (auth) {
    st = Start(pg, dir, o, "cached", true, o.batch_window_us, true, &guarded);
    if (st.ok()) st = Start(pg, dir, o, "uncached", true, o.batch_window_us, false, &bare);
  } else {
    st = Start(pg, dir, o, batch ? "batched" : "guarded", true, batch ? o.batch_window_us : 0,
               o.auth_cache, &guarded);
    if (st.ok()) {
      st = Start(pg, dir, o, batch ? "unbatched" : "bare", batch, 0, o.auth_cache, &bare);
    }
  }
  dup2(saved_stderr, STDERR_FILENO);  // our own messages
  if (!st.ok()) return Fail(st.ToString());
  dup2(log_fd, STDERR_FILENO);

  std::printf(
      "submit_bench: %s vs %s, %d clients, %.1f s rounds, %d ABBA pairs, %u CPUs; guarded: audit"
      " %d, rate limit %d, quota %d; batch window %d us, max %d; server log %s\n",
      guarded.name.c_str(), bare.name.c_str(), o.clients, o.seconds, o.pairs,
      std::thread::hardware_concurrency(), o.guarded_audit, o.guarded_rate_limit, o.guarded_quota,
      batch || auth ? o.batch_window_us : 0, o.batch_max, log_path.c_str());
  int64_t postmaster = -1;
  {
    std::ifstream pid_file(pg.dir() + "/pgdata/postmaster.pid");
    pid_file >> postmaster;
  }
  if (postmaster <= 0) return Fail("no postmaster.pid under " + pg.dir());
  double load_start[3] = {-1, -1, -1};
  getloadavg(load_start, 3);
  Round(o, o.warmup, false, postmaster, &guarded);
  Round(o, o.warmup, false, postmaster, &bare);
  std::vector<double> ratios;
  for (int p = 0; p < o.pairs; ++p) {
    // ABBA: guarded first in even pairs, bare first in odd ones.
    Target* first = p % 2 == 0 ? &guarded : &bare;
    Target* second = p % 2 == 0 ? &bare : &guarded;
    const double a = Round(o, o.seconds, true, postmaster, first);
    const double b = Round(o, o.seconds, true, postmaster, second);
    const double g = first == &guarded ? a : b;
    const double r = first == &guarded ? b : a;
    ratios.push_back(g / r);
    std::printf("pair %d: %s %.0f/s, %s %.0f/s, ratio %.3f\n", p + 1, guarded.name.c_str(), g,
                bare.name.c_str(), r, g / r);
    std::fflush(stdout);
  }

  auto report = [&](const Target& t) {
    const double rate = t.submitted / t.busy_s;
    std::printf(
        "%-8s %6.0f submissions/s  p50 %6.2f ms  p99 %6.2f ms  CPU/submission: "
        "%.3f ms here + %.3f ms PostgreSQL  (%lld jobs, %lld failed)\n",
        t.name.c_str(), rate, 1e3 * Percentile(t.latencies_s, 0.5),
        1e3 * Percentile(t.latencies_s, 0.99), 1e3 * t.cpu.self_s / t.submitted,
        1e3 * t.cpu.pg_s / t.submitted, static_cast<long long>(t.submitted),
        static_cast<long long>(t.failed));
    if (!t.first_failure.empty()) std::printf("  first failure: %s\n", t.first_failure.c_str());
    return rate;
  };
  const double g = report(guarded);
  const double b = report(bare);
  auto cpu_per = [](const Target& t) { return (t.cpu.self_s + t.cpu.pg_s) / t.submitted; };
  const double cpu_ratio = cpu_per(guarded) / cpu_per(bare);
  std::sort(ratios.begin(), ratios.end());
  const double ratio = g / b;
  const double median_pair = ratios[ratios.size() / 2];
  const double g_p99_ms = 1e3 * Percentile(guarded.latencies_s, 0.99);
  if (batch || auth) {
    std::printf("%s / %s throughput: %.3f (pairs %.3f..%.3f, median %.3f)\n", guarded.name.c_str(),
                bare.name.c_str(), ratio, ratios.front(), ratios.back(), median_pair);
    std::printf("issue 11 goal (%s >= 2000/s with p99 < 50 ms): %s (%.0f/s, p99 %.1f ms)\n",
                guarded.name.c_str(), g >= 2000 && g_p99_ms < 50 ? "met" : "NOT met", g, g_p99_ms);
  } else {
    std::printf(
        "guarded / bare throughput: %.3f (pairs %.3f..%.3f, median %.3f); goal >= 0.90: %s\n",
        ratio, ratios.front(), ratios.back(), median_pair, ratio >= 0.9 ? "met" : "NOT met");
  }
  std::printf("CPU per submission (this process + PostgreSQL), %s / %s: %.3f\n",
              guarded.name.c_str(), bare.name.c_str(), cpu_ratio);
  double load[3] = {-1, -1, -1};
  getloadavg(load, 3);
  std::printf("load average (1 min) at start %.2f, at end %.2f\n", load_start[0], load[0]);
  const std::string& gn = guarded.name;
  const std::string& bn = bare.name;
  json line = {{"bench", "submit_bench"},
               {"compare", o.compare},
               {"clients", o.clients},
               {"seconds_per_round", o.seconds},
               {"pairs", o.pairs},
               {"cpus", static_cast<int>(std::thread::hardware_concurrency())},
               {gn + "_per_s", g},
               {bn + "_per_s", b},
               {"ratio", ratio},
               {"median_pair_ratio", median_pair},
               {gn + "_p50_ms", 1e3 * Percentile(guarded.latencies_s, 0.5)},
               {gn + "_p99_ms", g_p99_ms},
               {bn + "_p50_ms", 1e3 * Percentile(bare.latencies_s, 0.5)},
               {bn + "_p99_ms", 1e3 * Percentile(bare.latencies_s, 0.99)},
               {gn + "_cpu_ms", 1e3 * cpu_per(guarded)},
               {bn + "_cpu_ms", 1e3 * cpu_per(bare)},
               {"cpu_ratio", cpu_ratio},
               {"batch_window_us", batch || auth ? o.batch_window_us : 0},
               {"batch_max", o.batch_max},
               {"loadavg_1m_start", load_start[0]},
               {"loadavg_1m_end", load[0]},
               {"guarded_audit", o.guarded_audit},
               {"guarded_rate_limit", o.guarded_rate_limit},
               {"guarded_quota", o.guarded_quota},
               {"auth_cache", auth ? "cached vs uncached" : o.auth_cache ? "both" : "neither"},
               {"failed", guarded.failed + bare.failed}};
  std::printf("%s\n", line.dump().c_str());
  std::fflush(stdout);
  if (o.profile > 0) ProfileStatements(pg, o.profile, {&guarded, &bare});
  guarded.server.reset();
  bare.server.reset();
  dup2(saved_stderr, STDERR_FILENO);
  close(log_fd);
  std::filesystem::remove_all(dir);
  return guarded.failed + bare.failed == 0 ? 0 : 1;
}
