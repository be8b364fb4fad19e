// embody-agent's command line (docs/contracts.md) and the agent token file.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace agent {

struct AgentOptions {
  std::string server;                     // --server http(s)://HOST:PORT (required)
  std::string token;                      // --token, or read from --token-file (one is required)
  std::string name;                       // --name, default: host name
  std::string data_dir;                   // --data-dir (required)
  std::string listen_host = "127.0.0.1";  // --listen HOST:PORT
  int listen_port = 0;
  std::string address = "127.0.0.1";  // --address: where other nodes reach this one
  int slots = 0;                      // --slots: 0 = detect
  std::string engine;                 // --engine, default: embody-engine beside this binary
  std::string embody_data;            // --embody-data, default: embody-data beside this binary
  // --dataset-root: where imported datasets live, the same path on every node and on the server
  // (a shared file system); "" : this node refuses import jobs.
  std::string dataset_root;
  std::string mpirun = "mpirun";      // --mpirun
  std::string port_file;              // --port-file: the chosen local API port is written here
  std::chrono::milliseconds kill_grace{5000};      // --kill-grace-ms: SIGTERM -> SIGKILL
  // --orphan-grace-ms: how long a job outlives its agent before its watcher stops it
  std::chrono::milliseconds orphan_grace{3000};
  // --job-log-mib-per-s, --job-log-burst-mib, --job-log-max-mib: how much of a job's rank output
  // is kept (rank_logs.h, RankLogCaps).
  int job_log_mib_per_s = 16;
  int job_log_burst_mib = 64;
  int job_log_max_mib = 4096;
  // --finished-job-retention-s: a finished job's directories on this node are removed once
  // untouched this long; 0: kept
  std::chrono::seconds finished_job_retention{3 * 86400};
  std::string nvml_library = "libnvidia-ml.so.1";  // --nvml-library
  // --image-cache-gib: the node's cache of unpacked OCI images (agent/images/image_cache.h)
  int image_cache_gib = 20;
  // Images pulled for import jobs from the registries the server names
  // (agent/data/registry_pull.h): --skopeo, --image-registry-auth (a containers-auth.json file the
  // agent's uid alone may read; "": anonymous), --image-pull-timeout-s and --image-pull-max-gib.
  std::string skopeo = "skopeo";
  std::string image_registry_auth;
  int image_pull_timeout_s = 1800;
  int image_pull_max_gib = 20;
  bool verbose = false;                            // --verbose: debug logs
  // The job sandbox (agent/sandbox/sandbox.h).
  int64_t job_uid_base = 200000;      // --job-uid-base: first job uid (gid the same)
  int job_uid_count = 65536;          // --job-uid-count: how many job uids
  // --tenant-gid-base, --tenant-gid-count: tenant t's jobs get group base + t (0 < t < count),
  // which opens its datasets; the same on every node, disjoint from the job uid range.
  int64_t tenant_gid_base = 10000000;
  int tenant_gid_count = 65536;
  bool run_jobs_as_agent = false;     // --run-jobs-as-agent: no uid switch even as root
  int job_max_processes = 4096;       // --job-max-processes: RLIMIT_NPROC, cgroup pids.max
  int job_max_open_files = 65536;     // --job-max-open-files: RLIMIT_NOFILE
  bool no_cgroups = false;            // --no-cgroups: rlimits only
  // --job-network confined|host (agent/sandbox/job_network.h): confined, each job reaches its
  // agent and its peers only (nft, root); host, jobs have the node's network. Unset: confined
  // where jobs get uids of their own (root), host otherwise, which the agent says at start.
  std::string job_network;
  std::string nft = "nft";            // --nft: nftables (the default: its library) or a program
  bool no_held_heartbeats = false;    // --no-held-heartbeats: never ask for a held heartbeat
  std::string job_path = "/usr/local/bin:/usr/bin:/bin";  // --job-path: PATH of every job
  // --metrics-token-file: the scrape secret shared with Prometheus, kept only as its hex SHA-256
  // (empty: none, and /metrics serves the public series only; local_api.h).
  std::string metrics_token_sha256;
  std::string metrics_token_file;  // the file it was read from, for the start-up checks
  // --tls-cert FILE --tls-key FILE (both or neither): the local API, the rsh bridge and /metrics
  // over TLS only; the agent then registers an https:// URL (docs/operations.md).
  std::string tls_cert;
  std::string tls_key;
  // --ca-file FILE: the CAs every https server this agent and its jobs call (embody-server,
  // other nodes' agents, this agent's own API) must chain to; "": the system's.
  std::string ca_file;
  // Not a flag: the embody-agent binary that every rank runs as `exec-rank` and every job's
  // watcher as `watch-job`; ParseAgentFlags sets this executable (SelfExecutable).
  std::string agent_binary;
};

// `args` excludes argv[0]. Accepts "--flag value" and "--flag=value". Returns invalid_argument
// naming the flag for unknown flags, missing values and missing required flags.
common::Result<AgentOptions> ParseAgentFlags(const std::vector<std::string>& args);
std::string AgentUsage();

// A token file holds the token alone (surrounding whitespace ignored) or the server's bootstrap
// JSON, {"agent_token": "..."}.
common::Result<std::string> ParseTokenFile(const std::string& contents);

// A metrics token file holds the scrape secret alone, one word of at least
// kMinMetricsTokenLength characters (surrounding whitespace ignored): a short one could be
// guessed by a job trying it against the agent's port.
inline constexpr size_t kMinMetricsTokenLength = 16;
common::Result<std::string> ParseMetricsTokenFile(const std::string& contents);

// "embody-engine" in the directory of the running executable (/proc/self/exe).
std::string DefaultEnginePath();
// "embody-data" in the directory of the running executable.
std::string DefaultEmbodyDataPath();
// The running executable's path (the ranks run it as `exec-rank`).
std::string SelfExecutable();

}  // namespace agent
