// The agent's parts started and stopped in one place, and its public face (agent/agent.h); they
// are made in agent_prepare.cc.
#include "agent/agent.h"

#include "agent/agent_impl.h"

namespace agent {

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
