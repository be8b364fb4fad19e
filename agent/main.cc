// embody-agent: one per node. Registers with embody-server, heartbeats, launches jobs under
// mpirun, ships their logs and events, and serves the job-local API and /metrics.
// SIGTERM/SIGINT: stop heartbeating, kill the running jobs (whole trees), report, exit.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "agent/agent_flags.h"
#include "agent/agent_metrics.h"
#include "agent/checkpoint_uploader.h"
#include "agent/dataset_import.h"
#include "agent/event_queue.h"
#include "agent/gpu_collector.h"
#include "agent/heartbeat_loop.h"
#include "agent/job_runner.h"
#include "agent/job_watcher.h"
#include "agent/local_api.h"
#include "agent/node_collector.h"
#include "agent/node_credential.h"
#include "agent/node_probe.h"
#include "agent/nvml_probe.h"
#include "agent/rank_exec.h"
#include "agent/rank_logs.h"
#include "agent/rsh_bridge.h"
#include "agent/rsh_client.h"
#include "agent/sandbox.h"
#include "agent/server_client.h"
#include "common/crypto.h"
#include "common/file_util.h"
#include "common/log.h"
#include "storage/checkpoint_http_store.h"

extern char** environ;

namespace {

int Fail(const std::string& message) {
  common::LogError(message);
  return 1;
}

bool AnyAddress(const std::string& host) {
  return host == "0.0.0.0" || host == "::" || host.empty();
}

}  // namespace

int main(int argc, char** argv) {
  // `exec-rank` runs in every rank of a job (agent/rank_exec.h): before anything below, which
  // would hand the job a blocked signal mask through exec.
  if (argc >= 2 && std::string(argv[1]) == "exec-rank") {
    return agent::RankExecMain(std::vector<std::string>(argv + 2, argv + argc));
  }
  // `rsh`: Open MPI's remote launcher for multi-node jobs (agent/rsh_client.h), run by mpirun
  // with the default signal dispositions it needs.
  if (argc >= 2 && std::string(argv[1]) == "rsh") {
    return agent::RshMain(std::vector<std::string>(argv + 2, argv + argc));
  }
  // `watch-job`: the watcher of one job (agent/job_watcher.h), started by the agent.
  if (argc >= 2 && std::string(argv[1]) == "watch-job") {
    return agent::WatchJobMain(std::vector<std::string>(argv + 2, argv + argc));
  }
  // Signals are blocked before any thread exists so every thread inherits the mask and only the
  // main thread's sigwait sees them; children get a clean mask back in SpawnInNewSession.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  std::vector<std::string> args(argv + 1, argv + argc);
  for (const auto& a : args) {
    if (a == "--help" || a == "-h") {
      std::fputs(agent::AgentUsage().c_str(), stdout);
      return 0;
    }
  }
  auto config = agent::ParseAgentFlags(args);
  if (!config.ok()) {
    std::fprintf(stderr, "embody-agent: %s\n%s", config.status().message().c_str(),
                 agent::AgentUsage().c_str());
    return 2;
  }
  agent::AgentConfig& cfg = *config;
  common::InitLog("agent", cfg.verbose ? common::LogLevel::kDebug : common::LogLevel::kInfo);

  std::error_code ec;
  cfg.data_dir = std::filesystem::absolute(cfg.data_dir, ec).lexically_normal().string();
  while (cfg.data_dir.size() > 1 && cfg.data_dir.back() == '/') cfg.data_dir.pop_back();

  // The job sandbox: what this node can do is probed once and reported at registration.
  agent::SandboxOptions sandbox;
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
  } else if (!agent::CanSwitchTo({sandbox.uid_base, static_cast<gid_t>(sandbox.uid_base),
                                  sandbox.tenant_gid_base + 1})) {
    common::LogWarn("cannot switch to job uids: jobs run as the agent's own uid",
                    {{"uid_base", std::to_string(sandbox.uid_base)}});
  } else {
    sandbox.switch_uid = true;
  }
  if (auto st = agent::PrepareDataDir(cfg.data_dir, sandbox.switch_uid); !st.ok()) {
    return Fail(st.message());
  }
  // Tenant directories an earlier agent made readable by anyone get their tenant's group now.
  if (auto st = agent::PrepareDatasetRoot(cfg.dataset_root, sandbox); !st.ok()) {
    return Fail("cannot secure --dataset-root " + cfg.dataset_root + ": " + st.message());
  }
  agent::CgroupSetup cgroups;
  if (cfg.no_cgroups) {
    cgroups.note = "--no-cgroups";
  } else {
    // Named after the data directory: two agents on one machine never share job cgroups.
    cgroups = agent::SetUpCgroups(common::Sha256Hex(cfg.data_dir).substr(0, 12));
  }
  api::NodeIsolation isolation = agent::DescribeIsolation(sandbox.switch_uid, cgroups.version);
  common::LogInfo("job isolation",
                  {{"unprivileged_uid", isolation.unprivileged_uid ? "true" : "false"},
                   {"cgroup", isolation.cgroup},
                   {"cgroup_note", cgroups.note},
                   {"rlimits", isolation.rlimits ? "true" : "false"}});

  agent::NodeCredential credential(cfg.token, cfg.data_dir + "/node.token");
  if (auto st = credential.Load(); !st.ok()) {
    common::LogWarn("ignoring the stored node credential", {{"error", st.message()}});
  }

  agent::NodeResources node = agent::ProbeNode(cfg.slots, cfg.nvml_library);
  // Kept open for the agent's life: the GPU series are read from it at every scrape.
  std::unique_ptr<agent::Nvml> nvml = agent::Nvml::Open(cfg.nvml_library);
  if (!nvml) common::LogInfo("no NVML, reporting no GPUs", {{"library", cfg.nvml_library}});
  agent::AgentMetrics metrics;
  metrics.SetNode(node.cpu_slots, static_cast<int>(node.gpus.size()));
  agent::EventQueue events;
  agent::RankLogs logs;

  std::atomic<agent::JobRunner*> runner_ptr{nullptr};
  agent::NodeCollector node_collector;
  agent::JobProcessCollector job_collector([&runner_ptr] {
    std::vector<agent::JobRoot> roots;
    if (agent::JobRunner* r = runner_ptr.load()) {
      for (const auto& job : r->RunningJobs()) {
        roots.push_back({job.job_id, job.tenant, job.launcher_pid});
      }
    }
    return roots;
  });
  agent::GpuCollector gpu_collector(nvml.get(), node.hostname);
  metrics.AddNodeCollector(&node_collector);
  metrics.AddNodeCollector(&gpu_collector);
  metrics.AddJobCollector(&job_collector);
  if (cfg.metrics_token_sha256.empty()) {
    common::LogInfo("no --metrics-token-file: /metrics serves no per-job series");
  } else if (struct stat st{}; ::stat(cfg.metrics_token_file.c_str(), &st) == 0 &&
                               (st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    // Jobs run as other uids: a file they can read hands them every tenant's series.
    common::LogWarn("the metrics token file is readable by other users",
                    {{"file", cfg.metrics_token_file}});
  }
  // One uid pool for the jobs this node heads and the daemons it runs for jobs headed elsewhere.
  agent::UidPool uid_pool(sandbox);
  std::vector<std::pair<std::string, std::string>> mpi_settings;
  {
    std::vector<std::string> env;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) env.emplace_back(*e);
    mpi_settings = agent::OpenMpiSettings(env);
  }
  agent::RshBridgeOptions rsh_opts;
  rsh_opts.data_dir = cfg.data_dir;
  rsh_opts.address = cfg.address;
  rsh_opts.mpirun = cfg.mpirun;
  rsh_opts.engine = cfg.engine;
  rsh_opts.rank_exec = agent::SelfExecutable();
  rsh_opts.sandbox = sandbox;
  rsh_opts.cgroups = cgroups;
  rsh_opts.mpi_settings = mpi_settings;
  rsh_opts.kill_grace = cfg.kill_grace;
  auto bridge = std::make_unique<agent::RshBridge>(rsh_opts, &uid_pool, &logs);
  agent::LocalApi local_api(
      [&runner_ptr](int64_t id) -> std::optional<agent::JobIdentity> {
        agent::JobRunner* r = runner_ptr.load();
        return r ? r->Identity(id) : std::nullopt;
      },
      &events, &metrics, cfg.metrics_token_sha256);
  // Checkpoints jobs write go to the server's blob store in the background, so a restart on
  // another node finds them (docs/checkpoints.md).
  storage::HttpCheckpointStoreOptions store_opts;
  store_opts.server_url = cfg.server;
  store_opts.token = [&credential] { return credential.Bearer(); };
  storage::HttpCheckpointStore checkpoint_store(store_opts);
  agent::CheckpointUploader uploader({cfg.data_dir + "/checkpoints"}, &checkpoint_store);
  local_api.SetEventObserver(
      [&uploader](int64_t job_id, const nlohmann::json& e) { uploader.Observe(job_id, e); });
  local_api.SetRshBridge(bridge.get(), rsh_opts.max_daemons);
  auto port = local_api.Start(cfg.listen_host, cfg.listen_port);
  if (!port.ok()) return Fail(port.status().message());
  std::string port_text = std::to_string(*port);
  std::string local_host = AnyAddress(cfg.listen_host) ? "127.0.0.1" : cfg.listen_host;
  std::string public_host = AnyAddress(cfg.listen_host) ? cfg.address : cfg.listen_host;
  if (!cfg.port_file.empty()) {
    if (auto st = common::WriteFileAtomic(cfg.port_file, port_text + "\n"); !st.ok()) {
      return Fail(st.message());
    }
  }
  common::LogInfo("agent listening", {{"host", cfg.listen_host}, {"port", port_text}});

  agent::JobRunnerOptions run_opts;
  run_opts.data_dir = cfg.data_dir;
  run_opts.address = cfg.address;
  run_opts.agent_url = "http://" + local_host + ":" + port_text;
  run_opts.mpirun = cfg.mpirun;
  run_opts.engine = cfg.engine;
  run_opts.embody_data = cfg.embody_data;
  run_opts.dataset_root = cfg.dataset_root;
  run_opts.kill_grace = cfg.kill_grace;
  run_opts.orphan_grace = cfg.orphan_grace;
  run_opts.rank_exec = agent::SelfExecutable();
  run_opts.sandbox = sandbox;
  run_opts.cgroups = cgroups;
  for (const auto& g : node.gpus) run_opts.gpus.push_back(g.index);
  run_opts.mpi_settings = mpi_settings;
  run_opts.uid_pool = &uid_pool;
  run_opts.fetch_checkpoint = [&checkpoint_store](const api::CheckpointRef& ref,
                                                  const std::string& path) -> common::Status {
    auto got = checkpoint_store.Get(ref.job_id, ref.id, path);
    if (!got.ok()) return got.status();
    if (got->sha256 != ref.sha256) {
      return common::FailedPrecondition("checkpoint " + std::to_string(ref.id) +
                                        " is not the one the launch named");
    }
    return common::Status::Ok();
  };
  // An import of an uploaded file reads the server's copy (agent/dataset_upload_fetch.h).
  agent::UploadFetchOptions upload_fetch;
  upload_fetch.server_url = cfg.server;
  upload_fetch.token = [&credential] { return credential.Bearer(); };
  run_opts.fetch_upload = [upload_fetch](const agent::UploadRef& ref,
                                         const std::string& path) -> common::Status {
    return agent::FetchUpload(upload_fetch, ref, path);
  };
  auto runner = std::make_unique<agent::JobRunner>(run_opts, &logs);
  // Before any heartbeat: what an earlier agent process left is stopped and reported first, and
  // a repeat of its launches from the server starts nothing twice.
  if (int found = runner->Reconcile(); found > 0) {
    common::LogWarn("took over jobs an earlier agent held", {{"jobs", std::to_string(found)}});
  }
  runner_ptr.store(runner.get());

  agent::HeartbeatOptions hb_opts;
  hb_opts.node.name = cfg.name;
  hb_opts.node.address = cfg.address;
  hb_opts.node.agent_url = "http://" + public_host + ":" + port_text;
  hb_opts.node.cpu_slots = node.cpu_slots;
  hb_opts.node.memory_bytes = node.memory_bytes;
  hb_opts.node.gpus = node.gpus;
  hb_opts.node.isolation = isolation;
  hb_opts.hold_idle_heartbeats = !cfg.no_held_heartbeats;
  agent::HttpServerChannel channel(cfg.server, &credential);
  agent::HeartbeatLoop loop(hb_opts, &channel, &credential, runner.get(), &logs, &events,
                            &metrics);
  loop.SetWorkerHandler(
      [&bridge](const std::vector<api::Command>& workers) { bridge->SetAssignments(workers); },
      [&bridge](int64_t job_id) { bridge->Kill(job_id); });
  runner->SetOnFinish([&metrics, &loop](int64_t id) {
    metrics.RemoveJob(id);
    loop.Wake();
  });
  common::LogInfo("agent starting", {{"name", cfg.name},
                                     {"server", cfg.server},
                                     {"address", cfg.address},
                                     {"cpu_slots", std::to_string(node.cpu_slots)},
                                     {"gpus", std::to_string(node.gpus.size())},
                                     {"data_dir", cfg.data_dir}});
  std::thread heartbeats([&loop] { loop.Run(); });
  // Retention of finished jobs' directories: checked a few times per retention period, at most
  // every 10 minutes.
  std::mutex retention_mu;
  std::condition_variable retention_cv;
  bool retention_stop = false;
  std::thread retention;
  if (cfg.finished_job_retention.count() > 0) {
    const auto every = std::clamp<std::chrono::seconds>(cfg.finished_job_retention / 4,
                                                        std::chrono::seconds(1),
                                                        std::chrono::seconds(600));
    retention = std::thread([&, every] {
      std::unique_lock<std::mutex> lock(retention_mu);
      while (!retention_cv.wait_for(lock, every, [&] { return retention_stop; })) {
        lock.unlock();
        runner->PruneFinishedDirs(cfg.finished_job_retention);
        lock.lock();
      }
    });
  }

  int sig = 0;
  sigwait(&stop_signals, &sig);
  common::LogInfo("stopping", {{"signal", std::to_string(sig)}});
  loop.Stop();
  heartbeats.join();
  {
    std::lock_guard<std::mutex> lock(retention_mu);
    retention_stop = true;
  }
  retention_cv.notify_all();
  if (retention.joinable()) retention.join();
  runner->KillAllAndWait("killed on agent shutdown");
  if (loop.node_id() != 0) loop.RunOnce(/*execute_commands=*/false);  // best effort final report
  runner_ptr.store(nullptr);
  local_api.Stop();
  runner.reset();
  bridge.reset();  // ends the daemons it runs for jobs headed elsewhere
  agent::TearDownCgroups(cgroups);
  common::LogInfo("stopped");
  return 0;
}
