#include "controlplane/flags.h"

#include <CLI/CLI.hpp>

#include <filesystem>
#include <functional>

#include "common/parse_int.h"

namespace controlplane {

namespace {

// The command line as one table: each flag's name, value, help text and the field of
// ServerOptions it sets. --help prints this table (CLI11's formatter), so the usage text and the
// parser cannot disagree. CLI11 splits "--flag value" / "--flag=value" and finds unknown flags;
// values are checked here, each naming its flag in the Status.
struct IntFlag {
  const char* name;
  int min, max;
  const char* help;
  std::function<int*(ServerOptions&)> field;
};

const std::vector<IntFlag>& IntFlags() {
  static const std::vector<IntFlag> kFlags = {
      {"--heartbeat-interval-ms", 50, 600000, "how often agents heartbeat",
       [](ServerOptions& o) { return &o.heartbeat_interval_ms; }},
      {"--max-nodes-per-job", 1, 100000, "largest job, in nodes",
       [](ServerOptions& o) { return &o.limits.max_nodes; }},
      {"--max-ranks-per-job", 1, 10000000, "largest job, in ranks",
       [](ServerOptions& o) { return &o.limits.max_ranks; }},
      {"--scheduler-period-ms", 10, 600000, "how often the scheduler runs",
       [](ServerOptions& o) { return &o.scheduler_period_ms; }},
      {"--db-pool-size", 1, 1000, "PostgreSQL connections",
       [](ServerOptions& o) { return &o.db_pool_size; }},
      {"--db-connect-timeout-s", 1, 600, "longest PostgreSQL connect",
       [](ServerOptions& o) { return &o.db_connect_timeout_s; }},
      {"--db-keepalives-idle-s", 1, 7200,
       "TCP keepalive to PostgreSQL: first probe after this much silence",
       [](ServerOptions& o) { return &o.db_keepalives_idle_s; }},
      {"--db-keepalives-interval-s", 1, 600, "TCP keepalive to PostgreSQL: seconds between probes",
       [](ServerOptions& o) { return &o.db_keepalives_interval_s; }},
      {"--db-keepalives-count", 1, 100,
       "TCP keepalive to PostgreSQL: unanswered probes before the connection is dead",
       [](ServerOptions& o) { return &o.db_keepalives_count; }},
      {"--db-statement-timeout-ms", 0, 86'400'000,
       "statement_timeout of every PostgreSQL session (0: none; a timed-out request gets 503)",
       [](ServerOptions& o) { return &o.db_statement_timeout_ms; }},
      {"--db-lock-timeout-ms", 0, 86'400'000,
       "lock_timeout of every PostgreSQL session (0: none; a timed-out request gets 503)",
       [](ServerOptions& o) { return &o.db_lock_timeout_ms; }},
      {"--rate-limit-per-s", 0, 1000000, "requests per second per token (0: no limit)",
       [](ServerOptions& o) { return &o.rate_limit_per_s; }},
      {"--rate-limit-burst", 0, 1000000, "burst per token (0: the per-second rate)",
       [](ServerOptions& o) { return &o.rate_limit_burst; }},
      {"--auth-cache", 0, 1,
       "keep authenticated tokens in memory, emptied on every token or tenant change this or "
       "another replica commits (0: read the token at every request)",
       [](ServerOptions& o) { return &o.auth_cache; }},
      {"--submit-batch-window-us", 0, 100'000,
       "POST /v1/jobs group commit: how long a batch waits for more submissions after its first "
       "(0: one transaction per submission)",
       [](ServerOptions& o) { return &o.submit_batch_window_us; }},
      {"--submit-batch-max", 1, 10'000, "POST /v1/jobs group commit: most submissions per batch",
       [](ServerOptions& o) { return &o.submit_batch_max; }},
      {"--audit-anonymous-burst", 0, 1'000'000,
       "audit rows of unauthenticated refusals per client address at once (then one a minute)",
       [](ServerOptions& o) { return &o.audit_anonymous_burst; }},
      {"--preempt-min-priority", -1, 100,
       "jobs at this priority or above may preempt lower ones (-1: no preemption)",
       [](ServerOptions& o) { return &o.preempt_min_priority; }},
      {"--default-max-priority", 0, 100,
       "the highest priority a member or tenant-admin may give a job where the tenant's "
       "quota.max_priority is not set",
       [](ServerOptions& o) { return &o.default_max_priority; }},
      {"--preempt-grace-ms", 0, 3600 * 1000, "how long a preempted job may take to exit",
       [](ServerOptions& o) { return &o.preempt_grace_ms; }},
      {"--fair-share-half-life-s", 0, 365 * 86400, "half-life of past usage in fair share",
       [](ServerOptions& o) { return &o.fair_share_half_life_s; }},
      {"--max-reservations", 0, 10000, "jobs the scheduler reserves slots for ahead of backfill",
       [](ServerOptions& o) { return &o.max_reservations; }},
      {"--forecast-snapshot-max-age-ms", 0, 60'000,
       "dry runs start from the scheduler's latest snapshot when it is at most this old (0: "
       "read the queue from the database)",
       [](ServerOptions& o) { return &o.forecast_snapshot_max_age_ms; }},
      {"--forecast-plan-max-age-ms", 0, 600'000,
       "while dry runs are asked, they are answered against the kept forward run of a scheduler "
       "snapshot at most this old (0: never)",
       [](ServerOptions& o) { return &o.forecast_plan_max_age_ms; }},
      {"--forecast-hand-over", 0, 1,
       "forecasts start a job placed at an expected end the server's learned hand-over time "
       "after it (0: at the end itself)",
       [](ServerOptions& o) { return &o.forecast_hand_over; }},
      {"--checkpoint-max-mib", 1, 1 << 20, "largest checkpoint the blob store takes, in MiB",
       [](ServerOptions& o) { return &o.checkpoint_max_mib; }},
      {"--checkpoint-quota-gib", 0, 1 << 20,
       "checkpoint bytes per tenant, uploading or stored, in GiB",
       [](ServerOptions& o) { return &o.checkpoint_quota_gib; }},
      {"--checkpoint-max-per-job", 1, 10000, "checkpoints per job, uploading or stored",
       [](ServerOptions& o) { return &o.checkpoint_max_per_job; }},
      {"--checkpoint-upload-ttl-s", 10, 30 * 86400, "an upload untouched this long is removed",
       [](ServerOptions& o) { return &o.checkpoint_upload_ttl_s; }},
      {"--dataset-upload-max-gib", 0, 1 << 20,
       "largest dataset file uploaded to <data-dir>/dataset-uploads, in GiB (0: no uploads)",
       [](ServerOptions& o) { return &o.dataset_upload_max_gib; }},
      {"--dataset-uploads-per-tenant", 1, 10000, "dataset uploads in progress per tenant",
       [](ServerOptions& o) { return &o.dataset_uploads_per_tenant; }},
      {"--dataset-upload-ttl-s", 10, 30 * 86400,
       "a dataset upload untouched this long fails (\"upload abandoned\")",
       [](ServerOptions& o) { return &o.dataset_upload_ttl_s; }},
      {"--history-retention-days", 0, 100 * 365,
       "logs and events (all but state changes) of jobs finished this long ago are pruned "
       "(0: never)",
       [](ServerOptions& o) { return &o.history_retention_days; }},
      {"--audit-retention-days", 0, 100 * 365,
       "audit log rows older than this are deleted (0: never)",
       [](ServerOptions& o) { return &o.audit_retention_days; }},
      {"--usage-retention-days", 0, 100 * 365,
       "daily usage totals (GET /v1/tenants/{id}/usage) older than this are deleted (0: never)",
       [](ServerOptions& o) { return &o.usage_retention_days; }},
      {"--plan-deviation-percent", 101, 10000,
       "a train job whose step takes more than this % of its plan's is slow (with --plan-cluster)",
       [](ServerOptions& o) { return &o.plan_deviation_percent; }},
      {"--plan-deviation-steps", 1, 1000000,
       "consecutive slow step events before a job is flagged off its plan",
       [](ServerOptions& o) { return &o.plan_deviation_steps; }},
  };
  return kFlags;
}

struct TextFlag {
  const char* name;
  const char* value;  // how the value is written in the usage
  const char* help;
  std::function<std::string*(ServerOptions&)> field;
};

const std::vector<TextFlag>& TextFlags() {
  static const std::vector<TextFlag> kFlags = {
      {"--db", "CONNINFO", "libpq connection string (required)",
       [](ServerOptions& o) { return &o.db; }},
      {"--data-dir", "DIR", "where logs and blobs are kept (required)",
       [](ServerOptions& o) { return &o.data_dir; }},
      {"--port-file", "FILE", "written with the bound port",
       [](ServerOptions& o) { return &o.port_file; }},
      {"--bootstrap-out", "FILE", "written (0600) with the tokens made at first start",
       [](ServerOptions& o) { return &o.bootstrap_out; }},
      {"--web-dir", "DIR", "the dashboard's built files",
       [](ServerOptions& o) { return &o.web_dir; }},
      {"--dataset-root", "DIR",
       "absolute directory every node mounts at the same path, holding imported datasets; "
       "unset: POST /v1/datasets is refused",
       [](ServerOptions& o) { return &o.dataset_root; }},
      {"--tls-cert", "FILE",
       "PEM certificate chain (the server's first): the API is served over TLS only, which "
       "needs --tls-key too",
       [](ServerOptions& o) { return &o.tls_cert; }},
      {"--tls-key", "FILE", "PEM private key of --tls-cert, not encrypted",
       [](ServerOptions& o) { return &o.tls_key; }},
      {"--plan-cluster", "FILE",
       "the nodes as a POST /v1/plan cluster (docs/planner.md); train jobs' step times are "
       "compared with their plan. Unset: no comparison",
       [](ServerOptions& o) { return &o.plan_cluster; }},
  };
  return kFlags;
}

// "HOST:PORT" with a port in [min_port, 65535].
common::Status ParseHostPort(const std::string& flag, const std::string& v, int min_port,
                             std::string* host, int* port) {
  const size_t colon = v.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return common::InvalidArgument("expects HOST:PORT, got '" + v + "'", flag);
  }
  auto p = common::ParseInt(v.substr(colon + 1), min_port, 65535, flag);
  if (!p.ok()) return common::InvalidArgument("expects HOST:PORT; port " + p.status().message(), flag);
  *host = v.substr(0, colon);
  *port = *p;
  return common::Status::Ok();
}

// Every flag's raw value as CLI11 found it; checked and converted after parsing.
struct RawFlags {
  std::string listen, advertise, audit;
  std::vector<std::string> image_registries;
  std::map<std::string, std::string> values;  // by flag name
  std::map<std::string, CLI::Option*> options;
};

void Define(CLI::App& app, RawFlags& raw, const ServerOptions& defaults) {
  app.allow_extras(true);  // unknown flags are reported by ParseServerFlags, naming the flag
  auto add = [&](const std::string& name, std::string& dst, const std::string& value,
                 const std::string& help, const std::string& default_text) {
    CLI::Option* opt = app.add_option(name, dst, help)->type_name(value);
    if (!default_text.empty()) opt->default_str(default_text);
    raw.options[name] = opt;
  };
  add("--listen", raw.listen, "HOST:PORT", "where the API listens; port 0: any free port (required)",
      "");
  for (const TextFlag& f : TextFlags()) {
    ServerOptions d = defaults;
    add(f.name, raw.values[f.name], f.value, f.help, *f.field(d));
  }
  for (const IntFlag& f : IntFlags()) {
    ServerOptions d = defaults;
    add(f.name, raw.values[f.name], "N",
        std::string(f.help) + " [" + std::to_string(f.min) + ", " + std::to_string(f.max) + "]",
        std::to_string(*f.field(d)));
  }
  raw.options["--image-registry"] =
      app.add_option("--image-registry", raw.image_registries,
                     "a registry tenants may pull images from (embody datasets pull), as "
                     "NAME=https://HOST[:PORT] (certificates verified) or NAME=http://HOST[:PORT] "
                     "(plain HTTP); repeat for each. None: pulls are refused")
          ->type_name("NAME=URL")
          ->allow_extra_args(false);  // one value per occurrence
  add("--audit", raw.audit, "0|1", "an audit row per mutating call (0: none, to measure the cost)",
      "1");
  add("--advertise", raw.advertise, "HOST:PORT",
      "what Prometheus service discovery lists for this server (default: the --listen address, "
      "or the discovery request's Host header when listening on all interfaces)",
      "");
}

// The flag a CLI11 error is about: the longest of our flag names its message mentions.
std::string FlagNamedIn(const std::string& message, const RawFlags& raw) {
  std::string best;
  for (const auto& [name, opt] : raw.options) {
    if (message.find(name) != std::string::npos && name.size() > best.size()) best = name;
  }
  return best;
}

}  // namespace

std::string DefaultWebDir() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    auto installed = exe.parent_path().parent_path() / "share" / "embody" / "web";
    if (std::filesystem::exists(installed / "index.html", ec)) return installed.string();
  }
  return EMBODY_BUILD_WEB_DIR;
}

std::string ServerUsage() {
  CLI::App app("embody-server: the Embody control plane (REST API, scheduler, dashboard)",
               "embody-server");
  RawFlags raw;
  Define(app, raw, ServerOptions{});
  return app.help();
}

common::Result<ServerOptions> ParseServerFlags(const std::vector<std::string>& args) {
  ServerOptions o;
  CLI::App app("embody-server", "embody-server");
  RawFlags raw;
  Define(app, raw, o);
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 pops from the back
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return common::InvalidArgument(e.what(), FlagNamedIn(e.what(), raw));
  }
  for (const std::string& extra : app.remaining()) {
    if (extra.rfind("-", 0) == 0) {
      return common::InvalidArgument("unknown flag", extra.substr(0, extra.find('=')));
    }
    return common::InvalidArgument("unexpected argument '" + extra + "'");
  }
  auto given = [&](const std::string& name) { return raw.options.at(name)->count() > 0; };
  if (!given("--listen")) return common::InvalidArgument("is required", "--listen");
  EMBODY_RETURN_IF_ERROR(ParseHostPort("--listen", raw.listen, 0, &o.listen_host, &o.listen_port));
  if (given("--advertise")) {
    std::string host;
    int port = 0;
    EMBODY_RETURN_IF_ERROR(ParseHostPort("--advertise", raw.advertise, 1, &host, &port));
    o.advertise = raw.advertise;
  }
  for (const TextFlag& f : TextFlags()) {
    if (given(f.name)) *f.field(o) = raw.values[f.name];
  }
  for (const IntFlag& f : IntFlags()) {
    if (!given(f.name)) continue;
    EMBODY_ASSIGN_OR_RETURN(n, common::ParseInt(raw.values[f.name], f.min, f.max, f.name));
    *f.field(o) = n;
  }
  if (given("--audit")) {
    EMBODY_ASSIGN_OR_RETURN(audit, common::ParseInt(raw.audit, 0, 1, "--audit"));
    o.audit = audit == 1;
  }
  for (const std::string& text : raw.image_registries) {
    EMBODY_ASSIGN_OR_RETURN(r, api::ParseImageRegistryFlag(text, "--image-registry"));
    for (const api::ImageRegistry& seen : o.image_registries) {
      if (seen.name == r.name || seen.host == r.host) {
        return common::InvalidArgument("names " + r.name + " (" + r.host + ") twice",
                                       "--image-registry");
      }
    }
    o.image_registries.push_back(std::move(r));
  }
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    return common::InvalidArgument("--tls-cert and --tls-key go together",
                                   o.tls_cert.empty() ? "--tls-cert" : "--tls-key");
  }
  if (o.db.empty()) return common::InvalidArgument("is required", "--db");
  if (o.data_dir.empty()) return common::InvalidArgument("is required", "--data-dir");
  if (!o.dataset_root.empty()) {
    if (o.dataset_root.front() != '/') {
      return common::InvalidArgument("must be an absolute path", "--dataset-root");
    }
    while (o.dataset_root.size() > 1 && o.dataset_root.back() == '/') o.dataset_root.pop_back();
  }
  return o;
}

}  // namespace controlplane
