// The agent's parts, made, started and stopped in one place (agent/agent.h).
#include "agent/agent.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>

#include "agent/node/agent_metrics.h"
#include "agent/data/checkpoint_uploader.h"
#include "agent/jobs/job_binaries.h"
#include "agent/data/dataset_import.h"
#include "agent/heartbeat/event_queue.h"
#include "agent/node/gpu_collector.h"
#include "agent/node/gpu_pool.h"
#include "agent/heartbeat/heartbeat_loop.h"
#include "agent/jobs/job_runner.h"
#include "agent/jobs/job_sandbox_options.h"
#include "agent/local_api/local_api.h"
#include "agent/launch/mpi_launch.h"
#include "agent/node/node_collector.h"
#include "agent/heartbeat/node_credential.h"
#include "agent/node/node_probe.h"
#include "agent/node/nvml_probe.h"
#include "agent/jobs/rank_logs.h"
#include "agent/rsh/rsh_bridge.h"
#include "agent/sandbox/job_network.h"
#include "agent/sandbox/sandbox.h"
#include "agent/heartbeat/server_client.h"
#include "common/crypto.h"
#include "common/file_util.h"
#include "common/http/client.h"
#include "common/http/server_tls.h"
#include "common/log.h"
#include "storage/checkpoint_http_store.h"

extern char** environ;

namespace agent {

namespace {

bool AnyAddress(const std::string& host) {
  return host == "0.0.0.0" || host == "::" || host.empty();
}

// Where jobs on this node reach the local API, and where other nodes do.
std::string LocalHost(const AgentOptions& cfg) {
  return AnyAddress(cfg.listen_host) ? "127.0.0.1" : cfg.listen_host;
}
std::string PublicHost(const AgentOptions& cfg) {
  return AnyAddress(cfg.listen_host) ? cfg.address : cfg.listen_host;
}

// A host as a URL writes it: an IPv6 address in brackets.
std::string UrlHost(const std::string& host) {
  return host.find(':') != std::string::npos && host.front() != '[' ? "[" + host + "]" : host;
}

std::string NormalDataDir(const std::string& dir) {
  std::error_code ec;
  std::string out = std::filesystem::absolute(dir, ec).lexically_normal().string();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

// The Open MPI settings the operator gave this process (OMPI_MCA_*, PMIX_MCA_*), passed on to
// every mpirun and daemon.
std::vector<std::pair<std::string, std::string>> OperatorMpiSettings() {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) env.emplace_back(*e);
  return OpenMpiSettings(env);
}

}  // namespace

// Members are destroyed bottom-up: what calls into another part is declared after it.
struct Agent::Impl {
  enum class State { kCreated, kStarted, kStopped };

  AgentOptions options;
  // The one copy of the job sandbox settings; the runner and the rsh bridge get it as is.
  JobSandboxOptions jobs;
  bool cgroups_torn_down = false;
  api::NodeIsolation isolation;
  NodeResources node;
  std::unique_ptr<NodeCredential> credential;
  // The local API's TLS (--tls-cert); null: plaintext.
  std::shared_ptr<const common::http::ServerTls> tls;
  std::string ca_file;  // --ca-file, absolute
  // Kept open for the agent's life: the GPU series are read from it at every scrape.
  std::unique_ptr<Nvml> nvml;
  EventQueue events;
  RankLogs logs;
  std::atomic<JobRunner*> runner_ptr{nullptr};
  NodeCollector node_collector;
  std::unique_ptr<JobProcessCollector> job_collector;
  std::unique_ptr<GpuCollector> gpu_collector;
  AgentMetrics metrics;
  // One uid pool and one GPU pool for the jobs this node heads and the daemons it runs for jobs
  // headed elsewhere.
  std::unique_ptr<UidPool> uid_pool;
  std::shared_ptr<GpuPool> gpu_pool;
  // What jobs' uids may reach on the network (--job-network); null: the node's whole network.
  // Before the bridge and the runner, which grant and revoke while jobs run.
  std::unique_ptr<JobNetwork> network;
  // Before the bridge and the runner, which hold entries of it while jobs run.
  std::unique_ptr<ImageCache> images;
  std::string container_init;  // embody-container-init, PID 1 of image jobs' containers
  std::unique_ptr<RshBridge> bridge;
  int max_rsh_streams = 0;  // the bridge's daemons at once, each holding one local API thread
  std::unique_ptr<storage::HttpCheckpointStore> checkpoint_store;
  std::unique_ptr<CheckpointUploader> uploader;
  std::unique_ptr<LocalApi> local_api;
  std::unique_ptr<JobRunner> runner;
  std::unique_ptr<HttpServerChannel> channel;
  std::unique_ptr<HeartbeatLoop> loop;
  std::thread heartbeats;
  std::mutex retention_mu;
  std::condition_variable retention_cv;
  bool retention_stop = false;
  std::thread retention;
  int port = 0;
  std::string local_url;
  std::string embody_data;  // the embody-data import jobs run (job_binaries.h)
  State state = State::kCreated;

  common::Status Prepare();
  common::Status PrepareTls();
  common::Status PrepareJobNetwork();
  common::Status StartParts();
  void StopParts();
};

common::Status Agent::Impl::Prepare() {
  const AgentOptions& cfg = options;
  jobs.data_dir = NormalDataDir(cfg.data_dir);
  jobs.address = cfg.address;
  jobs.mpirun = cfg.mpirun;
  jobs.engine = cfg.engine;
  jobs.rank_exec = cfg.agent_binary;
  // The Python SDK where the build and an install both put it: beside the agent's bin/.
  if (!cfg.agent_binary.empty() && cfg.agent_binary[0] == '/') {
    std::error_code ec;
    auto sdk = std::filesystem::weakly_canonical(
        std::filesystem::path(cfg.agent_binary).parent_path() / ".." / "share" / "embody" / "python",
        ec);
    if (!ec && std::filesystem::is_regular_file(sdk / "embody" / "__init__.py", ec)) {
      jobs.python_sdk = sdk.string();
    }
  }
  // The store wait command jobs' ranks preload (agent/launch/rendezvous_wait.h), built and
  // installed beside the agent; without it ranks start as before.
  if (!cfg.agent_binary.empty() && cfg.agent_binary[0] == '/') {
    std::error_code ec;
    auto lib =
        std::filesystem::path(cfg.agent_binary).parent_path() / "libembody-rendezvous-wait.so";
    if (std::filesystem::is_regular_file(lib, ec)) jobs.rendezvous_wait = lib.string();
  }
  jobs.mpi_settings = OperatorMpiSettings();
  jobs.kill_grace = cfg.kill_grace;
  logs.SetCaps({.bytes_per_s = int64_t{cfg.job_log_mib_per_s} << 20,
                .burst_bytes = int64_t{cfg.job_log_burst_mib} << 20,
                .total_bytes = int64_t{cfg.job_log_max_mib} << 20});

  // The job sandbox: what this node can do is probed once and reported at registration.
  SandboxOptions& sandbox = jobs.sandbox;
  sandbox.uid_base = static_cast<uid_t>(cfg.job_uid_base);
  sandbox.uid_count = cfg.job_uid_count;
  sandbox.tenant_gid_base = static_cast<gid_t>(cfg.tenant_gid_base);
  sandbox.tenant_gid_count = cfg.tenant_gid_count;
  sandbox.max_processes = cfg.job_max_processes;
  sandbox.max_open_files = cfg.job_max_open_files;
  sandbox.path = cfg.job_path;
  sandbox.switch_uid = false;
  if (cfg.run_jobs_as_agent) {
    common::LogWarn("--run-jobs-as-agent: jobs run as the agent's own uid");
  } else if (::geteuid() != 0) {
    common::LogWarn("not root: jobs run as the agent's own uid",
                    {{"uid", std::to_string(::geteuid())}});
  } else if (!CanSwitchTo({sandbox.uid_base, static_cast<gid_t>(sandbox.uid_base),
                           sandbox.tenant_gid_base + 1})) {
    common::LogWarn("cannot switch to job uids: jobs run as the agent's own uid",
                    {{"uid_base", std::to_string(sandbox.uid_base)}});
  } else {
    sandbox.switch_uid = true;
  }
  EMBODY_RETURN_IF_ERROR(PrepareDataDir(jobs.data_dir, sandbox.switch_uid));
  EMBODY_RETURN_IF_ERROR(PrepareTls());
  // What jobs' uids execute must be reachable by them (job_binaries.h).
  embody_data = cfg.embody_data;
  // PID 1 of image jobs' containers, built beside this binary
  // (agent/launch/container_init_main.cc).
  if (!cfg.agent_binary.empty() && cfg.agent_binary[0] == '/') {
    container_init =
        (std::filesystem::path(cfg.agent_binary).parent_path() / "embody-container-init").string();
  }
  if (sandbox.switch_uid) {
    const std::string bin = jobs.data_dir + "/bin";
    for (std::string* exe : {&jobs.rank_exec, &jobs.engine, &embody_data, &container_init}) {
      auto reachable = ExecutableForJobs(*exe, bin);
      if (!reachable.ok()) return reachable.status();
      *exe = *reachable;
    }
    auto sdk = PythonPackageForJobs(jobs.python_sdk, jobs.data_dir + "/python");
    if (!sdk.ok()) return sdk.status();
    jobs.python_sdk = *sdk;
    auto wait = ReadableForJobs(jobs.rendezvous_wait, bin);
    if (!wait.ok()) return wait.status();
    jobs.rendezvous_wait = *wait;
    // The rsh launcher and the ranks' reports verify agents with it, as the job's uid.
    auto readable = ReadableForJobs(jobs.ca_file, bin);
    if (!readable.ok()) return readable.status();
    jobs.ca_file = *readable;
    if (jobs.rank_exec != cfg.agent_binary) {
      common::LogInfo("jobs run copies of the agent's executables: they are below a directory "
                      "job uids cannot pass",
                      {{"from", cfg.agent_binary}, {"to", bin}});
    }
  }
  // Tenant directories an earlier agent made readable by anyone get their tenant's group now.
  if (auto st = PrepareDatasetRoot(cfg.dataset_root, sandbox); !st.ok()) {
    return common::Status(st.code(),
                          "cannot secure --dataset-root " + cfg.dataset_root + ": " + st.message());
  }
  if (cfg.no_cgroups) {
    jobs.cgroups.note = "--no-cgroups";
  } else {
    // Named after the data directory: two agents on one machine never share job cgroups.
    jobs.cgroups = SetUpCgroups(common::Sha256Hex(jobs.data_dir).substr(0, 12));
  }
  isolation = DescribeIsolation(sandbox.switch_uid, jobs.cgroups.version);
  common::LogInfo("job isolation",
                  {{"unprivileged_uid", isolation.unprivileged_uid ? "true" : "false"},
                   {"cgroup", isolation.cgroup},
                   {"cgroup_note", jobs.cgroups.note},
                   {"rlimits", isolation.rlimits ? "true" : "false"}});

  credential = std::make_unique<NodeCredential>(cfg.token, jobs.data_dir + "/node.token");
  if (auto st = credential->Load(); !st.ok()) {
    common::LogWarn("ignoring the stored node credential", {{"error", st.message()}});
  }

  node = ProbeNode(cfg.slots, cfg.nvml_library);
  nvml = Nvml::Open(cfg.nvml_library);
  if (!nvml) common::LogInfo("no NVML, reporting no GPUs", {{"library", cfg.nvml_library}});
  metrics.SetNode(node.cpu_slots, static_cast<int>(node.gpus.size()));
  job_collector = std::make_unique<JobProcessCollector>([this] {
    std::vector<JobRoot> roots;
    if (JobRunner* r = runner_ptr.load()) {
      for (const auto& job : r->RunningJobs()) {
        roots.push_back({job.job_id, job.tenant, job.launcher_pid});
      }
    }
    return roots;
  });
  gpu_collector = std::make_unique<GpuCollector>(nvml.get(), node.hostname);
  metrics.AddNodeCollector(&node_collector);
  metrics.AddNodeCollector(gpu_collector.get());
  metrics.AddJobCollector(job_collector.get());
  if (cfg.metrics_token_sha256.empty()) {
    common::LogInfo("no --metrics-token-file: /metrics serves no per-job series");
  } else if (struct stat st{}; ::stat(cfg.metrics_token_file.c_str(), &st) == 0 &&
                               (st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    // Jobs run as other uids: a file they can read hands them every tenant's series.
    common::LogWarn("the metrics token file is readable by other users",
                    {{"file", cfg.metrics_token_file}});
  }
  uid_pool = std::make_unique<UidPool>(sandbox);
  EMBODY_RETURN_IF_ERROR(PrepareJobNetwork());
  // Each GPU's device minor as NVML says it (the index where it cannot), for the cgroup's rules.
  std::map<int, int> minors;
  if (nvml) {
    for (const GpuSample& s : nvml->Sample()) minors[s.index] = s.minor_number;
  }
  std::vector<NodeGpu> node_gpus;
  for (const auto& g : node.gpus) {
    auto m = minors.find(g.index);
    node_gpus.push_back({g.index, m == minors.end() ? g.index : m->second});
  }
  gpu_pool = std::make_shared<GpuPool>(std::move(node_gpus));
  // Image jobs (docs/byo.md "Environments"): the cache of unpacked images under the data dir,
  // for the jobs this node heads and its parts of jobs headed elsewhere.
  {
    ImageCacheOptions image_opts;
    image_opts.dir = jobs.data_dir + "/images";
    image_opts.max_bytes = int64_t{cfg.image_cache_gib} << 30;
    auto cache = ImageCache::Open(image_opts);
    if (!cache.ok()) {
      common::LogWarn("no image cache: image jobs will fail", {{"error", cache.status().message()}});
    } else {
      images = std::move(*cache);
    }
  }
  RshBridgeOptions rsh_opts;
  rsh_opts.jobs = jobs;
  rsh_opts.gpus = gpu_pool;
  rsh_opts.images = images.get();
  rsh_opts.container_init = container_init;
  rsh_opts.orphan_grace = cfg.orphan_grace;
  max_rsh_streams = rsh_opts.max_daemons;
  bridge = std::make_unique<RshBridge>(rsh_opts, uid_pool.get(), &logs);
  if (int left = bridge->StopLeftovers(); left > 0) {
    common::LogWarn("stopped job daemons an earlier agent left", {{"count", std::to_string(left)}});
  }
  return common::Status::Ok();
}

// Whether jobs' network is confined (agent/sandbox/job_network.h), said once here. Before the
// rsh bridge stops what an earlier agent left: the table that agent left is replaced first, and
// its jobs' uids have no network while they are stopped.
common::Status Agent::Impl::PrepareJobNetwork() {
  const AgentOptions& cfg = options;
  if (cfg.job_network == "host") {
    common::LogWarn("--job-network=host: jobs reach whatever this node reaches");
    return common::Status::Ok();
  }
  const bool asked = cfg.job_network == "confined";
  if (!jobs.sandbox.switch_uid) {
    if (asked) {
      return common::FailedPrecondition(
          "--job-network=confined needs jobs under uids of their own: run the agent as root, "
          "without --run-jobs-as-agent");
    }
    common::LogWarn("jobs' network is not confined: they run as the agent's uid "
                    "(--job-network=confined needs root)");
    return common::Status::Ok();
  }
  JobNetworkTable table;
  // Named after the data directory, as the cgroups: two agents on one machine never share it.
  table.name = "embody_jobs_" + common::Sha256Hex(jobs.data_dir).substr(0, 12);
  table.uid_first = jobs.sandbox.uid_base;
  table.uid_last = jobs.sandbox.uid_base + static_cast<uid_t>(jobs.sandbox.uid_count) - 1;
  auto created = JobNetwork::Create(table, cfg.nft);
  if (!created.ok()) {
    return common::FailedPrecondition(
        "cannot confine jobs' network: " + created.status().message() +
        " (install nftables, or start with --job-network=host to give jobs the node's network)");
  }
  network = std::move(*created);
  jobs.network = network.get();
  common::LogInfo("jobs' network confined: each job reaches its agent and its nodes",
                  {{"nft_table", "inet " + table.name}});
  return common::Status::Ok();
}

// The certificate and the CA file are read before anything starts, so that a bad file, or a
// certificate the agent's own clients would refuse, is an error at start rather than a failure
// of every job later.
common::Status Agent::Impl::PrepareTls() {
  const AgentOptions& cfg = options;
  if (!cfg.ca_file.empty()) {
    std::error_code ec;
    ca_file = std::filesystem::absolute(cfg.ca_file, ec).lexically_normal().string();
    EMBODY_RETURN_IF_ERROR(common::http::CheckCaFile(ca_file));
  }
  jobs.ca_file = ca_file;
  if (cfg.tls_cert.empty() && cfg.tls_key.empty()) return common::Status::Ok();
  EMBODY_ASSIGN_OR_RETURN(loaded, common::http::ServerTls::Load({cfg.tls_cert, cfg.tls_key}));
  tls = loaded;
  // Jobs reach the API at the local host, other nodes at the public one: the certificate must
  // name both, as our clients read it (subjectAltName only).
  for (const std::string& host : {LocalHost(cfg), PublicHost(cfg)}) {
    if (!tls->Names(host)) {
      return common::InvalidArgument(
          "the certificate in " + cfg.tls_cert + " does not name " + host +
              " in its subjectAltName; " +
              (host == LocalHost(cfg) ? "jobs on this node" : "other nodes") +
              " reach the agent there",
          "tls-cert");
    }
  }
  return common::Status::Ok();
}

common::Status Agent::Impl::StartParts() {
  const AgentOptions& cfg = options;
  // Checkpoints jobs write go to the server's blob store in the background, so a restart on
  // another node finds them (docs/checkpoints.md).
  storage::HttpCheckpointStoreOptions store_opts;
  store_opts.server_url = cfg.server;
  store_opts.ca_file = ca_file;
  NodeCredential* cred = credential.get();
  store_opts.token = [cred] { return cred->Bearer(); };
  checkpoint_store = std::make_unique<storage::HttpCheckpointStore>(store_opts);
  uploader = std::make_unique<CheckpointUploader>(
      CheckpointUploaderOptions{jobs.data_dir + "/checkpoints"}, checkpoint_store.get());

  local_api = std::make_unique<LocalApi>(
      [this](int64_t id) -> std::optional<JobIdentity> {
        JobRunner* r = runner_ptr.load();
        return r ? r->Identity(id) : std::nullopt;
      },
      &events, &metrics, cfg.metrics_token_sha256);
  CheckpointUploader* up = uploader.get();
  local_api->SetEventObserver(
      [up](int64_t job_id, const nlohmann::json& e) { up->Observe(job_id, e); });
  local_api->SetRshBridge(bridge.get(), max_rsh_streams);
  local_api->SetTls(tls);
  EMBODY_ASSIGN_OR_RETURN(bound, local_api->Start(cfg.listen_host, cfg.listen_port));
  port = bound;
  const std::string port_text = std::to_string(port);
  const std::string scheme = tls ? "https://" : "http://";
  local_url = scheme + UrlHost(LocalHost(cfg)) + ":" + port_text;
  if (network) {
    auto endpoint = EndpointOfUrl(local_url);
    if (!endpoint.ok()) {
      return common::InvalidArgument(
          "jobs' network is confined by address: --listen must name an IP address, not " +
              cfg.listen_host,
          "listen");
    }
    network->SetLocalAgent(*endpoint);
  }
  if (!cfg.port_file.empty()) {
    EMBODY_RETURN_IF_ERROR(common::WriteFileAtomic(cfg.port_file, port_text + "\n"));
  }
  common::LogInfo(
      "agent listening",
      {{"host", cfg.listen_host}, {"port", port_text}, {"tls", tls ? "true" : "false"}});

  JobRunnerOptions run_opts;
  run_opts.jobs = jobs;
  run_opts.agent_url = local_url;
  run_opts.embody_data = embody_data;
  run_opts.dataset_root = cfg.dataset_root;
  run_opts.orphan_grace = cfg.orphan_grace;
  run_opts.gpus = gpu_pool;
  run_opts.uid_pool = uid_pool.get();
  run_opts.images = images.get();
  run_opts.container_init = container_init;
  storage::HttpCheckpointStore* store = checkpoint_store.get();
  run_opts.fetch_checkpoint = [store](const api::CheckpointRef& ref,
                                      const std::string& path) -> common::Status {
    auto got = store->Get(ref.job_id, ref.id, path);
    if (!got.ok()) return got.status();
    if (got->sha256 != ref.sha256) {
      return common::FailedPrecondition("checkpoint " + std::to_string(ref.id) +
                                        " is not the one the launch named");
    }
    return common::Status::Ok();
  };
  // An import of an uploaded file reads the server's copy (agent/data/dataset_upload_fetch.h).
  UploadFetchOptions upload_fetch;
  upload_fetch.server_url = cfg.server;
  upload_fetch.ca_file = ca_file;
  upload_fetch.token = [cred] { return cred->Bearer(); };
  run_opts.fetch_upload = [upload_fetch](const UploadRef& ref,
                                         const std::string& path) -> common::Status {
    return FetchUpload(upload_fetch, ref, path);
  };
  // An import pulling from a registry runs skopeo here (agent/data/registry_pull.h).
  RegistryPullOptions pull_opts;
  pull_opts.skopeo = cfg.skopeo;
  pull_opts.auth_file = cfg.image_registry_auth;
  pull_opts.timeout = std::chrono::seconds(cfg.image_pull_timeout_s);
  pull_opts.max_file_bytes = uint64_t{static_cast<uint64_t>(cfg.image_pull_max_gib)} << 30;
  // skopeo under a uid of the job pool, held for the pull, where jobs get uids of their own.
  UidPool* pull_uids = jobs.sandbox.switch_uid ? uid_pool.get() : nullptr;
  run_opts.pull_image = [pull_opts, pull_uids](const RegistryPull& pull, const std::string& path,
                                               const std::function<bool()>& stop) -> common::Status {
    RegistryPullOptions o = pull_opts;
    std::optional<uid_t> uid;
    if (pull_uids != nullptr) {
      auto held = pull_uids->Acquire(pull.dataset_id);
      if (!held.ok()) return held.status();
      uid = *held;
      o.run_as = JobCredentials{*uid, static_cast<gid_t>(*uid), std::nullopt};
    }
    common::Status st = PullImage(o, pull, path, stop);
    if (uid) pull_uids->Release(*uid);
    return st;
  };
  runner = std::make_unique<JobRunner>(run_opts, &logs);
  // Before any heartbeat: what an earlier agent process left is stopped and reported first, and
  // a repeat of its launches from the server starts nothing twice.
  if (int found = runner->Reconcile(); found > 0) {
    common::LogWarn("took over jobs an earlier agent held", {{"jobs", std::to_string(found)}});
  }
  // What an earlier agent left runs no more (Reconcile here, the bridge's StopLeftovers before).
  if (network) {
    if (auto st = network->ForgetStale(); !st.ok()) {
      common::LogWarn("cannot empty the job network's stale set", {{"error", st.message()}});
    }
  }
  runner_ptr.store(runner.get());

  HeartbeatOptions hb_opts;
  hb_opts.node.name = cfg.name;
  hb_opts.node.address = cfg.address;
  hb_opts.node.agent_url = scheme + UrlHost(PublicHost(cfg)) + ":" + port_text;
  hb_opts.node.cpu_slots = node.cpu_slots;
  hb_opts.node.memory_bytes = node.memory_bytes;
  hb_opts.node.gpus = node.gpus;
  hb_opts.node.isolation = isolation;
  hb_opts.hold_idle_heartbeats = !cfg.no_held_heartbeats;
  channel = std::make_unique<HttpServerChannel>(cfg.server, ca_file, credential.get());
  loop = std::make_unique<HeartbeatLoop>(hb_opts, channel.get(), credential.get(), runner.get(),
                                         &logs, &events, &metrics);
  RshBridge* b = bridge.get();
  loop->SetWorkerHandler(
      [b](const std::vector<api::Command>& workers) { b->SetAssignments(workers); },
      [b](int64_t job_id) { b->Kill(job_id); }, [b] { return b->HeldAssignments(); });
  HeartbeatLoop* l = loop.get();
  runner->SetOnFinish([this, l](int64_t id) {
    metrics.RemoveJob(id);
    l->Wake();
  });
  common::LogInfo("agent starting", {{"name", cfg.name},
                                     {"server", cfg.server},
                                     {"address", cfg.address},
                                     {"cpu_slots", std::to_string(node.cpu_slots)},
                                     {"gpus", std::to_string(node.gpus.size())},
                                     {"data_dir", jobs.data_dir}});
  heartbeats = std::thread([l] { l->Run(); });
  // Retention of finished jobs' directories: checked a few times per retention period, at most
  // every 10 minutes.
  if (cfg.finished_job_retention.count() > 0) {
    const auto every = std::clamp<std::chrono::seconds>(
        cfg.finished_job_retention / 4, std::chrono::seconds(1), std::chrono::seconds(600));
    retention = std::thread([this, every] {
      std::unique_lock<std::mutex> lock(retention_mu);
      while (!retention_cv.wait_for(lock, every, [this] { return retention_stop; })) {
        lock.unlock();
        runner->PruneFinishedDirs(options.finished_job_retention);
        lock.lock();
      }
    });
  }
  return common::Status::Ok();
}

// Each part is stopped only if it was made, so this also undoes a Start that failed half-way.
void Agent::Impl::StopParts() {
  if (loop) loop->Stop();
  if (heartbeats.joinable()) heartbeats.join();
  {
    std::lock_guard<std::mutex> lock(retention_mu);
    retention_stop = true;
  }
  retention_cv.notify_all();
  if (retention.joinable()) retention.join();
  if (runner) runner->KillAllAndWait("killed on agent shutdown");
  if (loop && loop->node_id() != 0) loop->RunOnce(/*execute_commands=*/false);  // best effort
  runner_ptr.store(nullptr);
  if (local_api) local_api->Stop();
  runner.reset();
  bridge.reset();    // ends the daemons it runs for jobs headed elsewhere
  if (network) {
    // No job runs now: the table goes with the agent.
    if (auto st = network->Remove(); !st.ok()) {
      common::LogWarn("cannot remove the job network table", {{"error", st.message()}});
    }
    jobs.network = nullptr;
    network.reset();
  }
  uploader.reset();  // after the local API, whose events it observes
  // The last jobs' uids are scrubbed now, so no scrub thread outlives Stop (the pool's own
  // destructor would do the same later).
  if (uid_pool) uid_pool->WaitScrubbed();
  if (!cgroups_torn_down) {
    TearDownCgroups(jobs.cgroups);
    cgroups_torn_down = true;
  }
}

Agent::Agent(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Agent::~Agent() { Stop(); }

common::Result<std::unique_ptr<Agent>> Agent::Create(AgentOptions options) {
  if (options.server.empty()) return common::InvalidArgument("no server URL", "server");
  if (options.data_dir.empty()) return common::InvalidArgument("no data directory", "data-dir");
  if (options.agent_binary.empty()) {
    // Ranks run it as `exec-rank` and watchers as `watch-job`: an in-process agent's own
    // executable is not embody-agent.
    return common::InvalidArgument("no agent binary", "agent_binary");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  // Owned by the agent from here, so a failure below still tears down what was set up.
  std::unique_ptr<Agent> agent(new Agent(std::move(impl)));
  EMBODY_RETURN_IF_ERROR(agent->impl_->Prepare());
  return agent;
}

common::Status Agent::Start() {
  if (impl_->state != Impl::State::kCreated) {
    return common::FailedPrecondition("the agent was started before");
  }
  impl_->state = Impl::State::kStarted;
  if (auto st = impl_->StartParts(); !st.ok()) {
    Stop();
    return st;
  }
  return common::Status::Ok();
}

void Agent::Stop() {
  if (impl_->state == Impl::State::kStopped) return;
  const bool started = impl_->state == Impl::State::kStarted;
  impl_->state = Impl::State::kStopped;
  impl_->StopParts();
  if (started) common::LogInfo("stopped");
}

int64_t Agent::node_id() const { return impl_->loop ? impl_->loop->node_id() : 0; }

int Agent::local_api_port() const { return impl_->port; }

std::string Agent::local_api_url() const { return impl_->local_url; }

const std::string& Agent::data_dir() const { return impl_->jobs.data_dir; }

const api::NodeIsolation& Agent::isolation() const { return impl_->isolation; }

std::vector<int64_t> Agent::RunningJobs() const {
  JobRunner* r = impl_->runner_ptr.load();
  return r ? r->Running() : std::vector<int64_t>{};
}

}  // namespace agent
