#include "cli/command_line.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <ostream>

#include "common/parse_int.h"

namespace cli {

namespace {

const char* kFooter = R"(
The server and token come from EMBODY_URL / EMBODY_TOKEN, or from the .embody/env file that
./deploy/quickstart.sh writes; an https server's certificate is checked against the CAs of
--ca-file or EMBODY_CA_FILE (default: the system's). Exit status: 0 done, 1 refused by the server (its message is
printed) or server unreachable, 2 usage error.)";

// The quota flags of `tenants create` and `tenants set`, and the quota field each one sets.
const std::pair<const char*, const char*> kQuotaFlags[] = {
    {"--quota-slots", "slots"},
    {"--quota-running-jobs", "running_jobs"},
    {"--quota-pending-jobs", "pending_jobs"},
    {"--quota-nodes-per-job", "nodes_per_job"},
    {"--quota-max-priority", "max_priority"},
};

// A quota value: a non-negative integer of at most 10 digits, or "none" for no limit (nullopt).
common::Result<std::optional<int64_t>> ParseQuota(const std::string& s) {
  if (s == "none") return std::optional<int64_t>();
  EMBODY_ASSIGN_OR_RETURN(n, common::ParseInt64(s, 0, 9'999'999'999));
  return std::optional<int64_t>(n);
}

const CLI::Validator kQuotaValue(
    [](std::string& s) -> std::string {
      return ParseQuota(s).ok() ? "" : "must be a non-negative integer or none";
    },
    "N|none");

// --quota-storage-gib: quota.storage_bytes given in whole GiB, at most 1 PiB (the server's
// bound), or "none"; sent in bytes.
constexpr char kStorageKey[] = "storage_bytes";
common::Result<std::optional<int64_t>> ParseStorageGib(const std::string& s) {
  if (s == "none") return std::optional<int64_t>();
  EMBODY_ASSIGN_OR_RETURN(gib, common::ParseInt64(s, 0, int64_t{1} << 20));
  return std::optional<int64_t>(gib << 30);
}

const CLI::Validator kStorageGibValue(
    [](std::string& s) -> std::string {
      return ParseStorageGib(s).ok() ? "" : "must be whole GiB between 0 and 1048576, or none";
    },
    "GIB|none");

// What every parsed value lands in before it becomes an Invocation: CLI11 fills plain values,
// and the Option pointers say which optional flags were given.
struct Parsed {
  Invocation inv;
  std::string output = "table";
  int rank = 0;
  int attempt = 0;
  int max_points = 0;
  double weight = 0;
  int64_t if_match = 0;
  int64_t tenant = 0;
  std::map<std::string, std::string> quota;
  std::vector<std::pair<CLI::App*, std::string>> commands;  // subcommand -> its name
  std::map<std::string, CLI::Option*> given;                // optional flags by name
  std::map<std::string, std::vector<CLI::Option*>> quota_opts;
};

void AddOutput(CLI::App* sub, Parsed* p) {
  sub->add_option("-o,--output", p->output, "table (default) or json: the server's JSON")
      ->check(CLI::IsMember({"table", "json"}));
}

void AddId(CLI::App* sub, Parsed* p, const std::string& what) {
  sub->add_option("ID", p->inv.id, what + " id")->required()->check(CLI::PositiveNumber);
}

CLI::App* Command(CLI::App& parent, Parsed* p, const std::string& name, const std::string& help,
                  const std::string& full_name = "") {
  CLI::App* sub = parent.add_subcommand(name, help);
  p->commands.push_back({sub, full_name.empty() ? name : full_name});
  return sub;
}

void AddQuotaFlags(CLI::App* sub, Parsed* p) {
  for (const auto& [flag, key] : kQuotaFlags) {
    const std::string k = key;
    std::string words = k;
    std::replace(words.begin(), words.end(), '_', ' ');
    p->quota_opts[k].push_back(
        sub->add_option(flag, p->quota[k], "quota: at most N " + words + " (none: no limit)")
            ->check(kQuotaValue));
  }
  p->quota_opts[kStorageKey].push_back(
      sub->add_option("--quota-storage-gib", p->quota[kStorageKey],
                      "quota: at most N GiB of datasets, images and checkpoints (none: no limit)")
          ->check(kStorageGibValue));
}

void Build(CLI::App& app, Parsed* p) {
  Invocation& inv = p->inv;
  app.require_subcommand(1);
  app.footer(kFooter);
  app.add_option("--ca-file", inv.ca_file,
                 "PEM file of the CAs an https server's certificate must chain to "
                 "(default: EMBODY_CA_FILE)")
      ->type_name("FILE");
  app.get_formatter()->column_width(34);

  CLI::App* ls = Command(app, p, "ls", "list jobs, newest first");
  ls->add_option("--state", inv.state, "only jobs in this state (PENDING, RUNNING, ...)");
  ls->add_option("--limit", inv.limit, "at most N jobs (1-500)")->check(CLI::Range(1, 500));
  AddOutput(ls, p);

  CLI::App* submit = Command(app, p, "submit", "submit a JobSpec (JSON); prints the job id");
  submit->add_option("FILE", inv.file, "the JobSpec file, or - for standard input")->required();
  submit->add_flag("--watch", inv.watch, "then watch it until it ends");
  submit->add_flag("--dry-run", inv.dry_run,
                   "submit nothing: whether it would be admitted, where and when it would start, "
                   "its predicted run time and why it would wait");
  AddOutput(submit, p);

  CLI::App* plan = Command(app, p, "plan",
                           "predict step/epoch time, memory and bottleneck at each size "
                           "(docs/planner.md); submits nothing");
  plan->add_option("FILE", inv.file, "the JobSpec, or a whole plan request, or - for stdin")
      ->required();
  plan->add_option("--gpus", inv.gpus, "sizes to plan, comma-separated (256,512,1024)");
  plan->add_option("--cluster", inv.cluster, "the cluster file (docs/plan/*.json)");
  AddOutput(plan, p);

  CLI::App* show = Command(app, p, "show", "the job as JSON");
  AddId(show, p, "job");
  AddOutput(show, p);

  CLI::App* watch =
      Command(app, p, "watch", "progress bar until the job ends (exit 0 if it succeeded)");
  AddId(watch, p, "job");

  CLI::App* cancel = Command(app, p, "cancel", "cancel a job");
  AddId(cancel, p, "job");
  AddOutput(cancel, p);

  CLI::App* logs = Command(app, p, "logs", "logs of every rank (or one)");
  AddId(logs, p, "job");
  logs->add_flag("-f,--follow", inv.follow, "follow until the job ends");
  p->given["rank"] = logs->add_option("--rank", p->rank, "only this rank (-1: the launcher)");
  p->given["attempt"] =
      logs->add_option("--attempt", p->attempt, "this attempt's logs (0: the first; default: latest)")
          ->check(CLI::NonNegativeNumber);

  CLI::App* events =
      Command(app, p, "events", "the job's events (state changes, steps, checkpoints)");
  AddId(events, p, "job");
  events->add_option("--type", inv.type,
                     "only events of this type (state, step, checkpoint, eval)");
  AddOutput(events, p);

  CLI::App* metrics =
      Command(app, p, "metrics", "the job's step series (default: every field, 500 points)");
  AddId(metrics, p, "job");
  metrics->add_option("--names", inv.names, "series, comma-separated (loss,tokens_per_s)");
  metrics->add_option("--since", inv.since, "from this step, or this RFC 3339 time");
  p->given["max_points"] =
      metrics->add_option("--max-points", p->max_points, "at most N points (1-5000)")
          ->check(CLI::Range(1, 5000));
  AddOutput(metrics, p);

  CLI::App* eval = Command(app, p, "eval",
                           "an eval job's results: success rate and mean return per task");
  AddId(eval, p, "job");
  AddOutput(eval, p);

  CLI::App* nodes =
      Command(app, p, "nodes", "nodes and their state; drain, undrain or reset one");
  nodes->require_subcommand(0, 1);
  AddOutput(nodes, p);
  for (const char* verb : {"drain", "undrain", "reset"}) {
    const std::string v = verb;
    CLI::App* sub = Command(*nodes, p, verb,
                            v == "drain"     ? "place no new job on the node (cluster-admin)"
                            : v == "undrain" ? "put a drained node back into service (cluster-admin)"
                                             : "revoke the node's credential, so that a new agent "
                                               "may register its name (cluster-admin)",
                            std::string("nodes ") + verb);
    AddId(sub, p, "node");
    AddOutput(sub, p);
  }

  CLI::App* tenants = Command(app, p, "tenants", "list tenants; create, show or change one");
  tenants->require_subcommand(0, 1);
  AddOutput(tenants, p);
  CLI::App* tc =
      Command(*tenants, p, "create", "create a tenant (cluster-admin)", "tenants create");
  tc->add_option("NAME", inv.name, "1-63 characters of a-z, 0-9, '.', '_', '-'")->required();
  p->given["weight"] = tc->add_option("--weight", p->weight, "fair-share weight (> 0; default 1)");
  AddQuotaFlags(tc, p);
  AddOutput(tc, p);
  CLI::App* ts = Command(*tenants, p, "show", "one tenant: quota, usage, version", "tenants show");
  AddId(ts, p, "tenant");
  AddOutput(ts, p);
  CLI::App* tset = Command(
      *tenants, p, "set",
      "change a tenant (cluster-admin); refused if it changed since it was read", "tenants set");
  AddId(tset, p, "tenant");
  tset->add_option("--name", inv.name, "new name");
  p->given["weight_set"] = tset->add_option("--weight", p->weight, "fair-share weight (> 0)");
  AddQuotaFlags(tset, p);
  p->given["if_match"] =
      tset->add_option("--if-version", p->if_match,
                       "only if the tenant is still at this version (default: as read now)");
  AddOutput(tset, p);

  CLI::App* tokens = Command(app, p, "tokens", "create, list and revoke tokens");
  tokens->require_subcommand(1);
  CLI::App* tk =
      Command(*tokens, p, "create", "create a token; prints its secret once", "tokens create");
  tk->add_option("--role", inv.role,
                 "cluster-admin, tenant-admin, member, viewer, agent or monitoring")
      ->required()
      ->check(CLI::IsMember(
          {"cluster-admin", "tenant-admin", "member", "viewer", "agent", "monitoring"}));
  tk->add_option("--name", inv.name, "what the token is for (1-128 characters)")->required();
  p->given["tenant"] = tk->add_option("--tenant", p->tenant, "tenant id (default: yours)")
                           ->check(CLI::PositiveNumber);
  tk->add_option("--expires", inv.expires, "expiry, RFC 3339 UTC (2027-01-01T00:00:00Z)");
  AddOutput(tk, p);
  CLI::App* tl =
      Command(*tokens, p, "ls", "list tokens (secrets are never shown again)", "tokens ls");
  p->given["tenant_ls"] = tl->add_option("--tenant", p->tenant, "only this tenant's tokens")
                              ->check(CLI::PositiveNumber);
  AddOutput(tl, p);
  CLI::App* tr = Command(*tokens, p, "revoke", "revoke a token", "tokens revoke");
  AddId(tr, p, "token");
  AddOutput(tr, p);

  CLI::App* pipelines =
      Command(app, p, "pipelines", "submit, list, show and cancel pipelines (docs/pipelines.md)");
  pipelines->require_subcommand(1);
  CLI::App* ps = Command(*pipelines, p, "submit", "submit a pipeline (JSON); prints its id",
                         "pipelines submit");
  ps->add_option("FILE", inv.file, "the pipeline file, or - for standard input")->required();
  ps->add_flag("--dry-run", inv.dry_run,
               "submit nothing: whether it would be admitted, and when each step is expected to "
               "start and end");
  AddOutput(ps, p);
  CLI::App* pl = Command(*pipelines, p, "ls", "your tenant's pipelines, newest first",
                         "pipelines ls");
  pl->add_option("--limit", inv.limit, "at most N pipelines (1-500)")->check(CLI::Range(1, 500));
  AddOutput(pl, p);
  CLI::App* pshow = Command(*pipelines, p, "show",
                            "one pipeline: each step's state, job, attempts and gate values",
                            "pipelines show");
  AddId(pshow, p, "pipeline");
  AddOutput(pshow, p);
  CLI::App* pc = Command(*pipelines, p, "cancel",
                         "cancel a pipeline: its running jobs too, its pending steps never run",
                         "pipelines cancel");
  AddId(pc, p, "pipeline");
  AddOutput(pc, p);

  CLI::App* datasets =
      Command(app, p, "datasets", "import, upload, pull, list, show and delete datasets");
  datasets->require_subcommand(1);
  CLI::App* dl = Command(*datasets, p, "ls", "your tenant's datasets, newest first", "datasets ls");
  dl->add_option("--limit", inv.limit, "at most N datasets (1-500)")->check(CLI::Range(1, 500));
  AddOutput(dl, p);
  CLI::App* dshow = Command(*datasets, p, "show", "one dataset: state, counts, statistics",
                            "datasets show");
  AddId(dshow, p, "dataset");
  AddOutput(dshow, p);
  CLI::App* di = Command(*datasets, p, "import",
                         "import an HDF5 file (robomimic / LIBERO) or a LeRobot dataset directory "
                         "(v2.x, v3.0) as the next version of NAME; runs as a job",
                         "datasets import");
  di->add_option("NAME", inv.name, "dataset name (1-128 letters, digits, '-', '_', '.')")
      ->required();
  di->add_option("PATH", inv.path,
                 "absolute path of the file (hdf5) or directory (lerobot), as the nodes see it "
                 "(read as an unprivileged uid)")
      ->required();
  di->add_option("--format", inv.format, "hdf5 (default) or lerobot")
      ->check(CLI::IsMember({"hdf5", "lerobot"}));
  di->add_option("--filter", inv.filter, "hdf5: import only the demos listed in mask/<F>");
  di->add_option("--language", inv.language,
                 "language instruction (overrides the file's, or the LeRobot tasks)");
  di->add_option("--nan", inv.nan,
                 "hdf5: demos with NaN/Inf actions: refuse the file (default) or skip them")
      ->check(CLI::IsMember({"refuse", "skip"}));
  di->add_option("--resize", inv.resize, "lerobot: decode every camera to HxW (e.g. 224x224)");
  AddOutput(di, p);
  CLI::App* du = Command(*datasets, p, "upload",
                         "upload a local HDF5 file (robomimic / LIBERO) or LeRobot dataset "
                         "directory (sent as a tar) in chunks as the next version of NAME, then "
                         "import it as a job",
                         "datasets upload");
  du->add_option("NAME", inv.name, "dataset name (1-128 letters, digits, '-', '_', '.')")
      ->required();
  du->add_option("FILE", inv.path,
                 "the local file (hdf5), the LeRobot dataset directory or a tar of it "
                 "(lerobot), or an OCI image layout tar (oci: what `skopeo copy ... "
                 "oci-archive:FILE.tar` or `podman save --format oci-archive` writes)")
      ->required();
  du->add_option("--format", inv.format,
                 "hdf5 (default), lerobot, or oci (an image for command jobs' "
                 "\"environment\": {\"image\": NAME})")
      ->check(CLI::IsMember({"hdf5", "lerobot", "oci"}));
  du->add_option("--filter", inv.filter, "hdf5: import only the demos listed in mask/<F>");
  du->add_option("--language", inv.language,
                 "language instruction (overrides the file's, or the LeRobot tasks)");
  du->add_option("--nan", inv.nan,
                 "hdf5: demos with NaN/Inf actions: refuse the file (default) or skip them")
      ->check(CLI::IsMember({"refuse", "skip"}));
  du->add_option("--resize", inv.resize, "lerobot: decode every camera to HxW (e.g. 224x224)");
  du->add_option("--chunk-mib", inv.chunk_mib, "chunk size in MiB (1-8; default 4)")
      ->check(CLI::Range(1, 8));
  du->add_option("--resume", inv.resume,
                 "continue the interrupted upload of dataset ID from the bytes the server holds")
      ->check(CLI::PositiveNumber);
  AddOutput(du, p);
  CLI::App* dpull = Command(*datasets, p, "pull",
                            "pull an OCI image from a registry the operator configured as the "
                            "next version of NAME (an image for command jobs' \"environment\": "
                            "{\"image\": NAME}); runs as an import job",
                            "datasets pull");
  dpull->add_option("NAME", inv.name, "dataset name (1-128 letters, digits, '-', '_', '.')")
      ->required();
  dpull->add_option("IMAGE", inv.path,
                    "REGISTRY/REPOSITORY:TAG or REGISTRY/REPOSITORY@sha256:DIGEST, REGISTRY being "
                    "a registry's name (or HOST:PORT) as the server's --image-registry gives it")
      ->required();
  AddOutput(dpull, p);
  CLI::App* dexp = Command(*datasets, p, "export",
                           "download a ready dataset version and write it into DIR as a LeRobot "
                           "v3.0 dataset (parquet, AV1 video)",
                           "datasets export");
  AddId(dexp, p, "dataset");
  dexp->add_option("DIR", inv.path, "output directory (missing or empty)")->required();
  dexp->add_option("--format", inv.format, "lerobot (v3.0)")
      ->required()
      ->check(CLI::IsMember({"lerobot"}));
  dexp->add_option("--fps", inv.fps, "frames per second (default: the dataset's own)")
      ->check(CLI::Range(0.001, 1000.0));
  dexp->add_option("--codec", inv.codec,
                   "video encoder: av1 (default; libsvtav1, libaom-av1 or librav1e) or a name");
  AddOutput(dexp, p);
  CLI::App* drm = Command(*datasets, p, "rm", "delete a dataset version", "datasets rm");
  AddId(drm, p, "dataset");
  AddOutput(drm, p);

  CLI::App* usage = Command(app, p, "usage",
                            "slot-hours (GPU-hours on GPU nodes) per day and token of a tenant");
  p->given["tenant_usage"] =
      usage->add_option("TENANT", p->tenant, "tenant id (default: yours)")
          ->check(CLI::PositiveNumber);
  usage->add_option("--from", inv.from, "first UTC day, YYYY-MM-DD (default: 30 days ago)");
  usage->add_option("--to", inv.to, "last UTC day, YYYY-MM-DD (default: today)");
  AddOutput(usage, p);

  CLI::App* whoami = Command(app, p, "whoami", "the token in use: its name, role and tenant");
  AddOutput(whoami, p);

  CLI::App* audit =
      Command(app, p, "audit", "the audit log, newest first (tenant-admin, cluster-admin)");
  audit->add_option("--limit", inv.limit, "at most N entries (default 50)")
      ->check(CLI::PositiveNumber);
  audit->add_flag("--all", inv.all, "every entry, following the pages");
  AddOutput(audit, p);
}

}  // namespace

std::variant<Invocation, int> ParseCommandLine(const std::vector<std::string>& args,
                                               std::ostream& out, std::ostream& err) {
  CLI::App app("embody: the command-line client of an Embody control plane", "embody");
  Parsed p;
  Build(app, &p);
  // CLI11 would say only that a subcommand is required.
  if (!args.empty() && !args[0].empty() && args[0][0] != '-') {
    bool known = false;
    for (const auto& [sub, name] : p.commands) known = known || name == args[0];
    if (!known) {
      err << "embody: unknown command \"" << args[0] << "\"\nRun 'embody --help' for usage.\n";
      return kExitUsage;
    }
  }
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    out << app.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::ParseError& e) {
    std::string cmd;
    for (const auto& [sub, name] : p.commands) {
      if (sub->parsed()) cmd = name;
    }
    err << "embody: " << (cmd.empty() ? "" : cmd + ": ") << e.what() << "\n"
        << "Run 'embody " << (cmd.empty() ? "" : cmd + " ") << "--help' for usage.\n";
    return kExitUsage;
  }
  Invocation inv = std::move(p.inv);
  // The deepest parsed subcommand names the command ("tenants create", not "tenants").
  for (const auto& [sub, name] : p.commands) {
    if (sub->parsed()) inv.command = name;
  }
  inv.json = p.output == "json";
  auto given = [&](const char* name) { return p.given.count(name) && p.given[name]->count() > 0; };
  if (given("rank")) inv.rank = p.rank;
  if (given("attempt")) inv.attempt = p.attempt;
  if (given("max_points")) inv.max_points = p.max_points;
  if (given("weight") || given("weight_set")) inv.weight = p.weight;
  if (given("if_match")) inv.if_match = p.if_match;
  if (given("tenant") || given("tenant_ls") || given("tenant_usage")) inv.tenant = p.tenant;
  for (const auto& [key, opts] : p.quota_opts) {
    for (CLI::Option* o : opts) {
      // Checked by kQuotaValue and kStorageGibValue.
      if (o->count() > 0) {
        inv.quota[key] =
            key == kStorageKey ? *ParseStorageGib(p.quota[key]) : *ParseQuota(p.quota[key]);
      }
    }
  }
  return inv;
}

}  // namespace cli
