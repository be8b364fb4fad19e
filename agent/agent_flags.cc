#include "agent/agent_flags.h"

#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <cctype>
#include <filesystem>
#include <functional>
#include <map>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "common/crypto.h"
#include "common/file_util.h"
#include "common/parse_int.h"

namespace agent {
namespace {

using common::InvalidArgument;

std::string Trim(const std::string& s) {
  const char* ws = " \t\r\n";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

}  // namespace

common::Result<std::string> ParseTokenFile(const std::string& contents) {
  std::string text = Trim(contents);
  if (!text.empty() && text.front() == '{') {
    auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("agent_token") ||
        !j["agent_token"].is_string()) {
      return InvalidArgument("token file holds JSON without a string \"agent_token\"",
                             "token-file");
    }
    text = Trim(j["agent_token"].get<std::string>());
  }
  if (text.empty()) return InvalidArgument("token file is empty", "token-file");
  if (text.find_first_of(" \t\r\n") != std::string::npos) {
    return InvalidArgument("token file holds more than one word", "token-file");
  }
  return text;
}

common::Result<std::string> ParseMetricsTokenFile(const std::string& contents) {
  std::string text = Trim(contents);
  if (text.empty()) return InvalidArgument("metrics token file is empty", "metrics-token-file");
  if (text.find_first_of(" \t\r\n") != std::string::npos) {
    return InvalidArgument("metrics token file holds more than one word", "metrics-token-file");
  }
  if (text.size() < kMinMetricsTokenLength) {
    return InvalidArgument(
        "metrics token is shorter than " + std::to_string(kMinMetricsTokenLength) + " characters",
        "metrics-token-file");
  }
  return text;
}

std::string DefaultEnginePath() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "embody-engine";
  return (exe.parent_path() / "embody-engine").string();
}

std::string DefaultEmbodyDataPath() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "embody-data";
  return (exe.parent_path() / "embody-data").string();
}

std::string SelfExecutable() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("embody-agent") : exe.string();
}

namespace {

// The command line as one table: each flag's name, how its value is written, help text, and how
// its value lands in AgentOptions. --help prints this table (CLI11's formatter), so the usage and
// the parser cannot disagree. CLI11 splits "--flag value" / "--flag=value" and finds unknown
// flags; each value is checked here, the Status naming the flag without its dashes ("slots").
struct Flag {
  const char* name;   // without the leading "--"
  const char* value;  // how the value is written in the usage; nullptr: a switch
  const char* help;
  // Sets the flag's value in the config; for a switch, called with "" when given.
  std::function<common::Status(const std::string& v, AgentOptions& c)> set;
  // The default shown in the usage, from a default-constructed config; empty: none shown.
  std::function<std::string(const AgentOptions& c)> shown = nullptr;
};

std::function<common::Status(const std::string&, AgentOptions&)> Text(
    std::string AgentOptions::*f) {
  return [f](const std::string& v, AgentOptions& c) {
    c.*f = v;
    return common::Status::Ok();
  };
}

template <typename T>
std::function<common::Status(const std::string&, AgentOptions&)> Int(const char* name,
                                                                     T AgentOptions::*f,
                                                                     int64_t min, int64_t max) {
  return [=](const std::string& v, AgentOptions& c) {
    auto n = common::ParseInt64(v, min, max, name);
    if (!n.ok())
      return InvalidArgument("--" + std::string(name) + " " + n.status().message(), name);
    c.*f = static_cast<T>(*n);
    return common::Status::Ok();
  };
}

template <typename T>
std::function<std::string(const AgentOptions&)> Shown(T AgentOptions::*f) {
  return [f](const AgentOptions& c) {
    if constexpr (std::is_same_v<T, std::string>) {
      return c.*f;
    } else {
      return std::to_string(c.*f);
    }
  };
}

// Written to by the --token-file flag; read by ParseAgentFlags after all flags are set.
struct Files {
  std::string token_file;
};

std::vector<Flag> AgentFlags(Files* files) {
  return {
      {"server", "URL", "embody-server's URL, http://HOST:PORT or https://HOST:PORT (required)",
       Text(&AgentOptions::server)},
      {"token", "TOKEN", "the join token (this or --token-file is required)",
       Text(&AgentOptions::token)},
      {"token-file", "FILE",
       "file holding the join token, alone or as the server's bootstrap JSON {\"agent_token\"}",
       [files](const std::string& v, AgentOptions&) {
         files->token_file = v;
         return common::Status::Ok();
       }},
      {"data-dir", "DIR", "the agent's state and job directories (required)",
       Text(&AgentOptions::data_dir)},
      {"name", "NODE", "the node's name (default: the host name)", Text(&AgentOptions::name)},
      {"listen", "HOST:PORT", "the job-local API and /metrics; port 0: any free port",
       [](const std::string& v, AgentOptions& c) {
         size_t colon = v.rfind(':');
         if (colon == std::string::npos || colon == 0) {
           return InvalidArgument("--listen wants HOST:PORT, got \"" + v + "\"", "listen");
         }
         auto port = common::ParseInt(v.substr(colon + 1), 0, 65535, "listen");
         if (!port.ok())
           return InvalidArgument("--listen port " + port.status().message(), "listen");
         c.listen_host = v.substr(0, colon);
         c.listen_port = *port;
         return common::Status::Ok();
       },
       [](const AgentOptions& c) { return c.listen_host + ":" + std::to_string(c.listen_port); }},
      {"address", "HOST", "where other nodes reach this one", Text(&AgentOptions::address),
       Shown(&AgentOptions::address)},
      {"slots", "N", "slots to offer (default: detected GPUs, else CPU cores)",
       Int("slots", &AgentOptions::slots, 1, 1 << 20)},
      {"engine", "PATH", "embody-engine (default: beside this binary)",
       Text(&AgentOptions::engine)},
      {"embody-data", "PATH", "embody-data, run by import jobs (default: beside this binary)",
       Text(&AgentOptions::embody_data)},
      {"dataset-root", "DIR",
       "absolute directory of imported datasets, the same path on every node and the server",
       Text(&AgentOptions::dataset_root)},
      {"mpirun", "PATH", "Open MPI's launcher", Text(&AgentOptions::mpirun),
       Shown(&AgentOptions::mpirun)},
      {"port-file", "FILE", "written with the local API's port", Text(&AgentOptions::port_file)},
      {"kill-grace-ms", "MS", "SIGTERM to SIGKILL when a job is killed",
       [](const std::string& v, AgentOptions& c) {
         auto ms = common::ParseInt(v, 0, 3600 * 1000, "kill-grace-ms");
         if (!ms.ok()) {
           return InvalidArgument("--kill-grace-ms " + ms.status().message(), "kill-grace-ms");
         }
         c.kill_grace = std::chrono::milliseconds(*ms);
         return common::Status::Ok();
       },
       [](const AgentOptions& c) { return std::to_string(c.kill_grace.count()); }},
      {"orphan-grace-ms", "MS",
       "how long a job's processes outlive a dead agent before they are stopped",
       [](const std::string& v, AgentOptions& c) {
         auto ms = common::ParseInt(v, 0, 3600 * 1000, "orphan-grace-ms");
         if (!ms.ok()) {
           return InvalidArgument("--orphan-grace-ms " + ms.status().message(), "orphan-grace-ms");
         }
         c.orphan_grace = std::chrono::milliseconds(*ms);
         return common::Status::Ok();
       },
       [](const AgentOptions& c) { return std::to_string(c.orphan_grace.count()); }},
      {"job-log-mib-per-s", "MIB",
       "a job's rank output kept per second, MiB; beyond (and its burst) it is dropped with a marker",
       [](const std::string& v, AgentOptions& c) {
         auto n = common::ParseInt(v, 1, 1048576, "job-log-mib-per-s");
         if (!n.ok()) return InvalidArgument("--job-log-mib-per-s " + n.status().message(), "job-log-mib-per-s");
         c.job_log_mib_per_s = *n;
         return common::Status::Ok();
       },
       [](const AgentOptions& c) { return std::to_string(c.job_log_mib_per_s); }},
      {"job-log-burst-mib", "MIB",
       "a job's rank output kept at once above its rate, MiB",
       [](const std::string& v, AgentOptions& c) {
         auto n = common::ParseInt(v, 1, 1048576, "job-log-burst-mib");
         if (!n.ok()) return InvalidArgument("--job-log-burst-mib " + n.status().message(), "job-log-burst-mib");
         c.job_log_burst_mib = *n;
         return common::Status::Ok();
       },
       [](const AgentOptions& c) { return std::to_string(c.job_log_burst_mib); }},
      {"job-log-max-mib", "MIB",
       "a job's rank output kept per attempt, MiB; beyond it is dropped after a marker",
       [](const std::string& v, AgentOptions& c) {
         auto n = common::ParseInt(v, 1, 1073741824, "job-log-max-mib");
         if (!n.ok()) return InvalidArgument("--job-log-max-mib " + n.status().message(), "job-log-max-mib");
         c.job_log_max_mib = *n;
         return common::Status::Ok();
       },
       [](const AgentOptions& c) { return std::to_string(c.job_log_max_mib); }},
      {"finished-job-retention-s", "S",
       "a finished job's directories here are removed once untouched this long (0: kept)",
       [](const std::string& v, AgentOptions& c) {
         auto s = common::ParseInt(v, 0, 365 * 86400, "finished-job-retention-s");
         if (!s.ok()) {
           return InvalidArgument("--finished-job-retention-s " + s.status().message(),
                                  "finished-job-retention-s");
         }
         c.finished_job_retention = std::chrono::seconds(*s);
         return common::Status::Ok();
       },
       [](const AgentOptions& c) { return std::to_string(c.finished_job_retention.count()); }},
      {"image-cache-gib", "GIB",
       "unpacked OCI images kept for image jobs; past it, the least recently used no job runs "
       "in are removed",
       Int("image-cache-gib", &AgentOptions::image_cache_gib, 1, 1 << 20)},
      {"skopeo", "PATH", "skopeo, which pulls images from registries for import jobs",
       Text(&AgentOptions::skopeo), Shown(&AgentOptions::skopeo)},
      {"image-registry-auth", "FILE",
       "credentials for the registries the server pulls from (containers-auth.json, as `skopeo "
       "login --authfile FILE` writes it), readable by this agent's user alone; unset: "
       "anonymous",
       Text(&AgentOptions::image_registry_auth)},
      {"image-pull-timeout-s", "S", "an image pull still running after this long fails",
       Int("image-pull-timeout-s", &AgentOptions::image_pull_timeout_s, 10, 86400),
       Shown(&AgentOptions::image_pull_timeout_s)},
      {"image-pull-max-gib", "GIB",
       "the largest file an image pull may write (its archive, every blob); past it the pull "
       "fails",
       Int("image-pull-max-gib", &AgentOptions::image_pull_max_gib, 1, 1 << 16),
       Shown(&AgentOptions::image_pull_max_gib)},
      {"nvml-library", "PATH", "NVML, loaded at run time", Text(&AgentOptions::nvml_library),
       Shown(&AgentOptions::nvml_library)},
      {"verbose", nullptr, "debug logs",
       [](const std::string&, AgentOptions& c) {
         c.verbose = true;
         return common::Status::Ok();
       }},
      {"job-uid-base", "UID", "first job uid (gid the same)",
       Int("job-uid-base", &AgentOptions::job_uid_base, 1000, 2000000000),
       Shown(&AgentOptions::job_uid_base)},
      {"job-uid-count", "N", "how many job uids",
       Int("job-uid-count", &AgentOptions::job_uid_count, 1, 1 << 24),
       Shown(&AgentOptions::job_uid_count)},
      {"tenant-gid-base", "GID",
       "tenant T's jobs get supplementary group GID + T, which opens T's datasets (the same on "
       "every node)",
       Int("tenant-gid-base", &AgentOptions::tenant_gid_base, 1000, 2000000000),
       Shown(&AgentOptions::tenant_gid_base)},
      {"tenant-gid-count", "N", "tenant groups: tenants 1 .. N-1 may run jobs",
       Int("tenant-gid-count", &AgentOptions::tenant_gid_count, 2, 1 << 24),
       Shown(&AgentOptions::tenant_gid_count)},
      {"run-jobs-as-agent", nullptr, "no uid switch for jobs, even as root",
       [](const std::string&, AgentOptions& c) {
         c.run_jobs_as_agent = true;
         return common::Status::Ok();
       }},
      {"job-max-processes", "N", "RLIMIT_NPROC and cgroup pids.max of a job",
       Int("job-max-processes", &AgentOptions::job_max_processes, 16, 1 << 22),
       Shown(&AgentOptions::job_max_processes)},
      {"job-max-open-files", "N", "RLIMIT_NOFILE of a job",
       Int("job-max-open-files", &AgentOptions::job_max_open_files, 64, 1 << 24),
       Shown(&AgentOptions::job_max_open_files)},
      {"job-network", "confined|host",
       "confined: a job reaches its own agent and the nodes of its allocation only, by nftables "
       "rules on its uid (root and nft needed: the agent refuses to start without them); host: "
       "jobs reach whatever the node reaches. Default: confined when jobs run as uids of their "
       "own (root), host otherwise",
       [](const std::string& v, AgentOptions& c) {
         if (v != "confined" && v != "host") {
           return InvalidArgument("--job-network is confined or host, not \"" + v + "\"",
                                  "job-network");
         }
         c.job_network = v;
         return common::Status::Ok();
       }},
      {"nft", "PATH",
       "nft, which confines jobs' network (Debian package nftables); the default calls "
       "nftables' library in process, another path is run as a program",
       Text(&AgentOptions::nft), Shown(&AgentOptions::nft)},
      {"no-cgroups", nullptr, "rlimits only, even where cgroups are available",
       [](const std::string&, AgentOptions& c) {
         c.no_cgroups = true;
         return common::Status::Ok();
       }},
      {"no-held-heartbeats", nullptr,
       "heartbeat once an interval without asking the server to hold an idle heartbeat until a "
       "launch exists (slower launches; for comparison and for proxies that cut long calls)",
       [](const std::string&, AgentOptions& c) {
         c.no_held_heartbeats = true;
         return common::Status::Ok();
       }},
      {"job-path", "PATH", "PATH of every job", Text(&AgentOptions::job_path),
       Shown(&AgentOptions::job_path)},
      {"metrics-token-file", "FILE",
       "the scrape secret shared with Prometheus; without it /metrics serves the node's series "
       "only",
       Text(&AgentOptions::metrics_token_file)},
      {"tls-cert", "FILE",
       "PEM certificate chain (this node's first), naming --address and the address jobs use "
       "(127.0.0.1, or the --listen host): the local API, rsh bridge and /metrics over TLS "
       "only; needs --tls-key",
       Text(&AgentOptions::tls_cert)},
      {"tls-key", "FILE", "PEM private key of --tls-cert, not encrypted",
       Text(&AgentOptions::tls_key)},
      {"ca-file", "FILE",
       "PEM file of the CAs the certificates of embody-server, the other nodes' agents and this "
       "one's must chain to (default: the system's)",
       Text(&AgentOptions::ca_file)},
  };
}

constexpr const char* kSubcommands =
    "\nSub-command, run by mpirun in every rank of a job (not for people):\n"
    "  embody-agent exec-rank [--address-space BYTES] FILE\n";

// Every flag on `app`, values kept as text in `raw` (by flag name) until the table's setters
// check them; switches are counted in `options`.
void Define(CLI::App& app, const std::vector<Flag>& flags, std::map<std::string, std::string>* raw,
            std::map<std::string, CLI::Option*>* options) {
  app.allow_extras(true);  // unknown flags are reported by ParseAgentFlags, naming the flag
  app.footer(kSubcommands);
  const AgentOptions defaults;
  for (const Flag& f : flags) {
    const std::string name = std::string("--") + f.name;
    CLI::Option* opt = f.value == nullptr
                           ? app.add_flag(name, f.help)
                           : app.add_option(name, (*raw)[f.name], f.help)->type_name(f.value);
    if (f.shown) opt->default_str(f.shown(defaults));
    (*options)[f.name] = opt;
  }
}

}  // namespace

std::string AgentUsage() {
  CLI::App app("embody-agent: one per node; runs the jobs embody-server allocates to it",
               "embody-agent");
  Files files;
  std::map<std::string, std::string> raw;
  std::map<std::string, CLI::Option*> options;
  Define(app, AgentFlags(&files), &raw, &options);
  return app.help();
}

common::Result<AgentOptions> ParseAgentFlags(const std::vector<std::string>& args) {
  AgentOptions c;
  Files files;
  const std::vector<Flag> flags = AgentFlags(&files);
  CLI::App app("embody-agent", "embody-agent");
  std::map<std::string, std::string> raw;
  std::map<std::string, CLI::Option*> options;
  Define(app, flags, &raw, &options);
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 pops from the back
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    // The flag the error is about: the longest of our flag names the message mentions.
    std::string field;
    for (const Flag& f : flags) {
      const std::string name = std::string("--") + f.name;
      if (std::string(e.what()).find(name) != std::string::npos && name.size() > field.size() + 2) {
        field = f.name;
      }
    }
    return InvalidArgument(e.what(), field);
  }
  for (const std::string& extra : app.remaining()) {
    if (extra.rfind("--", 0) == 0) {
      const std::string name = extra.substr(2, extra.find('=') - 2);
      return InvalidArgument("unknown flag --" + name, name);
    }
    return InvalidArgument("unexpected argument \"" + extra + "\"");
  }
  for (const Flag& f : flags) {
    if (options.at(f.name)->count() == 0) continue;
    EMBODY_RETURN_IF_ERROR(f.set(f.value == nullptr ? "" : raw[f.name], c));
  }
  const std::string& token_file = files.token_file;
  if (c.server.empty()) return InvalidArgument("--server is required", "server");
  if (c.server.rfind("http://", 0) != 0 && c.server.rfind("https://", 0) != 0) {
    return InvalidArgument(
        "--server wants http://HOST:PORT or https://HOST:PORT, got \"" + c.server + "\"", "server");
  }
  if (c.tls_cert.empty() != c.tls_key.empty()) {
    return InvalidArgument("--tls-cert and --tls-key go together",
                           c.tls_cert.empty() ? "tls-cert" : "tls-key");
  }
  // The value travels in mpirun's launcher command line, which Open MPI splits on whitespace.
  for (char ch : c.ca_file) {
    if (std::isspace(static_cast<unsigned char>(ch))) {
      return InvalidArgument("--ca-file must be a path without whitespace", "ca-file");
    }
  }
  if (c.data_dir.empty()) return InvalidArgument("--data-dir is required", "data-dir");
  if (!token_file.empty()) {
    if (!c.token.empty()) {
      return InvalidArgument("give --token or --token-file, not both", "token-file");
    }
    auto contents = common::ReadFile(token_file);
    if (!contents.ok()) return InvalidArgument("cannot read " + token_file, "token-file");
    auto token = ParseTokenFile(*contents);
    if (!token.ok()) return token.status();
    c.token = *token;
  }
  if (c.token.empty()) return InvalidArgument("--token or --token-file is required", "token");
  if (!c.metrics_token_file.empty()) {
    auto contents = common::ReadFile(c.metrics_token_file);
    if (!contents.ok()) {
      return InvalidArgument("cannot read " + c.metrics_token_file, "metrics-token-file");
    }
    auto secret = ParseMetricsTokenFile(*contents);
    if (!secret.ok()) return secret.status();
    // Prometheus sends the scrape secret to every agent: it must never be the join token.
    if (*secret == c.token) {
      return InvalidArgument("the metrics token must differ from the agent's token",
                             "metrics-token-file");
    }
    c.metrics_token_sha256 = common::Sha256Hex(*secret);
  }
  if (c.job_uid_base + c.job_uid_count > 2000000000LL) {
    return InvalidArgument("--job-uid-base + --job-uid-count must stay below 2000000000",
                           "job-uid-count");
  }
  if (c.tenant_gid_base + c.tenant_gid_count > 2000000000LL) {
    return InvalidArgument("--tenant-gid-base + --tenant-gid-count must stay below 2000000000",
                           "tenant-gid-count");
  }
  // A job's own gid is its uid: a job uid inside the tenant groups would be some tenant's group.
  if (c.tenant_gid_base < c.job_uid_base + c.job_uid_count &&
      c.job_uid_base < c.tenant_gid_base + c.tenant_gid_count) {
    return InvalidArgument("tenant groups [" + std::to_string(c.tenant_gid_base) + ", " +
                               std::to_string(c.tenant_gid_base + c.tenant_gid_count) +
                               ") meet the job uids [" + std::to_string(c.job_uid_base) + ", " +
                               std::to_string(c.job_uid_base + c.job_uid_count) +
                               "), whose gids are the same numbers: move --tenant-gid-base",
                           "tenant-gid-base");
  }
  if (!c.image_registry_auth.empty()) {
    // Registry passwords: a file others could read (or replace) is refused, not used.
    struct stat st {};
    if (c.image_registry_auth.front() != '/' ||
        ::stat(c.image_registry_auth.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      return InvalidArgument("--image-registry-auth must be an absolute path of a file",
                             "image-registry-auth");
    }
    if (st.st_uid != ::geteuid() || (st.st_mode & 077) != 0) {
      return InvalidArgument("--image-registry-auth " + c.image_registry_auth +
                                 " must belong to this agent's user with mode 0600 or 0400",
                             "image-registry-auth");
    }
  }
  if (c.name.empty()) {
    char host[256] = {};
    if (::gethostname(host, sizeof(host) - 1) == 0) c.name = host;
  }
  if (c.engine.empty()) c.engine = DefaultEnginePath();
  if (c.embody_data.empty()) c.embody_data = DefaultEmbodyDataPath();
  c.agent_binary = SelfExecutable();
  if (!c.dataset_root.empty()) {
    if (c.dataset_root.front() != '/') {
      return InvalidArgument("--dataset-root must be an absolute path", "dataset-root");
    }
    while (c.dataset_root.size() > 1 && c.dataset_root.back() == '/') c.dataset_root.pop_back();
  }
  return c;
}

}  // namespace agent
