// The agent's parts made from its options before anything starts (agent/agent_impl.h): the job
// sandbox settings, the data directory, job network confinement, TLS.
#include "agent/agent_impl.h"

extern char** environ;

namespace agent {

namespace {

bool AnyAddress(const std::string& host) {
  return host == "0.0.0.0" || host == "::" || host.empty();
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

std::string LocalHost(const AgentOptions& cfg) {
  return AnyAddress(cfg.listen_host) ? "127.0.0.1" : cfg.listen_host;
}

std::string PublicHost(const AgentOptions& cfg) {
  return AnyAddress(cfg.listen_host) ? cfg.address : cfg.listen_host;
}

std::string UrlHost(const std::string& host) {
  return host.find(':') != std::string::npos && host.front() != '[' ? "[" + host + "]" : host;
}

common::Status Agent::Impl::Prepare() {
  const AgentOptions& cfg = options;
  jobs.data_dir = NormalDataDir(cfg.data_dir);
  jobs.address = cfg.address;
  jobs.mpirun = cfg.mpirun;
  jobs.engine = cfg.engine;
  // What job starts execute (exec-rank, launch-ranks, watch-job): embody-job-exec, built and
  // installed beside the agent, loads only the C library at each start; an agent without it
  // runs itself. mpirun's rsh agent is always the agent (it speaks HTTP).
  jobs.rank_exec = cfg.agent_binary;
  jobs.rsh_exec = cfg.agent_binary;
  if (!cfg.agent_binary.empty() && cfg.agent_binary[0] == '/') {
    std::error_code ec;
    auto job_exec = std::filesystem::path(cfg.agent_binary).parent_path() / "embody-job-exec";
    if (std::filesystem::is_regular_file(job_exec, ec) && ::access(job_exec.c_str(), X_OK) == 0) {
      jobs.rank_exec = job_exec.string();
    }
  }
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
    for (std::string* exe :
         {&jobs.rank_exec, &jobs.rsh_exec, &jobs.engine, &embody_data, &container_init}) {
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
    if (jobs.rsh_exec != cfg.agent_binary) {
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

}  // namespace agent
