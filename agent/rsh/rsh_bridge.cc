#include "agent/rsh/rsh_bridge.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "agent/sandbox/job_processes.h"
#include "agent/launch/mpi_launch.h"
#include "agent/sandbox/process_tree.h"
#include "agent/rsh/rsh_protocol.h"
#include "agent/sandbox/spawn.h"
#include "common/crypto.h"
#include "common/file_util.h"
#include "common/log.h"

namespace agent {
namespace {

constexpr size_t kMaxBodyBytes = 2 * kMaxDaemonCommandBytes;
constexpr size_t kReadChunk = kMaxFramePayload;

std::string BearerCredential(const std::string& authorization) {
  const std::string kBearer = "Bearer ";
  if (authorization.rfind(kBearer, 0) != 0) return "";
  return authorization.substr(kBearer.size());
}

common::Status NoPartHere(int64_t job_id) {
  return common::NotFound("job " + std::to_string(job_id) + " has no part on this node");
}

// Whether `authorization` carries the job token of `worker`'s attempt.
common::Status CheckJobToken(const api::Command& worker, const std::string& authorization) {
  const std::string token = BearerCredential(authorization);
  if (token.empty() ||
      !common::ConstantTimeEquals(common::Sha256Hex(token), worker.job_token_sha256)) {
    return common::Status(common::Code::kUnauthenticated, "missing or wrong job token");
  }
  return common::Status::Ok();
}

int64_t MemoryPerRank(const nlohmann::json& spec) {
  if (!spec.is_object() || !spec.contains("resources") || !spec["resources"].is_object()) return 0;
  auto m = spec["resources"].find("memory_per_rank_bytes");
  if (m == spec["resources"].end() || !m->is_number_integer()) return 0;
  return std::max<int64_t>(0, m->get<int64_t>());
}

// The job's world size: nodes x ranks_per_node (a worker's `hosts` holds only its own node's
// entry); 0 when the spec does not say.
int TotalRanks(const nlohmann::json& spec) {
  if (!spec.is_object() || !spec.contains("resources") || !spec["resources"].is_object()) return 0;
  const auto& r = spec["resources"];
  const int64_t nodes = r.value("nodes", 1), per_node = r.value("ranks_per_node", 1);
  if (nodes <= 0 || per_node <= 0 || nodes * per_node > (1 << 20)) return 0;
  return static_cast<int>(nodes * per_node);
}

bool IsGpuJob(const nlohmann::json& spec) {
  if (!spec.is_object() || !spec.contains("resources") || !spec["resources"].is_object()) return false;
  auto t = spec["resources"].find("slot_type");
  return t != spec["resources"].end() && t->is_string() && t->get<std::string>() == "gpu";
}

std::string JoinInts(const std::vector<int>& v) {
  std::string out;
  for (int x : v) out += (out.empty() ? "" : ",") + std::to_string(x);
  return out;
}

int SlotsPerRank(const nlohmann::json& spec) {
  if (!spec.is_object() || !spec.contains("resources") || !spec["resources"].is_object()) return 1;
  auto s = spec["resources"].find("slots_per_rank");
  if (s == spec["resources"].end() || !s->is_number_integer()) return 1;
  return static_cast<int>(std::clamp<int64_t>(s->get<int64_t>(), 1, 1 << 16));
}

}  // namespace

RemoteDaemon::~RemoteDaemon() {
  if (output_fd_ >= 0) ::close(output_fd_);
}

RemoteDaemon::Update RemoteDaemon::Next(std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  Update u;
  while (true) {
    char buf[kReadChunk];
    ssize_t n = ::read(output_fd_, buf, sizeof buf);
    if (n > 0) {
      u.output.assign(buf, static_cast<size_t>(n));
      return u;
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (exit_code_) {
      // Everything the daemon wrote was read before its exit was recorded? Read once more.
      lock.unlock();
      n = ::read(output_fd_, buf, sizeof buf);
      if (n > 0) {
        u.output.assign(buf, static_cast<size_t>(n));
        return u;
      }
      u.exit_code = exit_code_;
      return u;
    }
    if (std::chrono::steady_clock::now() >= deadline) return u;
    // Output is polled (a regular file has no readiness to wait for); an exit wakes at once.
    changed_.wait_for(lock, std::chrono::milliseconds(50));
  }
}

void RemoteDaemon::Stop(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_ || exit_code_ || pid_ == 0) return;
  stopping_ = true;
  common::LogInfo("stopping job daemon", {{"job", std::to_string(job_id_)}, {"why", why}});
  killer_ = std::thread([this] { Kill(); });
}

void RemoteDaemon::Kill() {
  auto tree = JobTree(ListProcesses(), pid_, pid_);
  SignalAll(tree, SIGTERM);
  std::unique_lock<std::mutex> lock(mu_);
  if (changed_.wait_for(lock, grace_, [this] { return exit_code_.has_value(); })) return;
  lock.unlock();
  SignalAll(JobTree(ListProcesses(), pid_, pid_), SIGKILL);
  // What left the session dies in Reap (cgroup and uid sweep) once the daemon has exited.
}

RshBridge::RshBridge(RshBridgeOptions options, UidPool* uids, RankLogs* logs)
    : options_(std::move(options)),
      records_(options_.jobs.data_dir + "/daemons/running"),
      uids_(uids),
      logs_(logs) {}

int RshBridge::StopLeftovers() {
  std::vector<JobRecord> found = records_.LoadAll();
  for (const JobRecord& r : found) {
    // Its watcher first, so that nothing else acts on the daemon while it is stopped here.
    if (r.watcher.pid > 0) SignalAll({r.watcher}, SIGKILL);
    int stopped = 0;
    if (r.processes) {
      stopped = StopJobProcesses(*r.processes, options_.jobs.kill_grace);
      LockDir(JobDir(r.job_id), uids_);
      LockDir(options_.jobs.CheckpointDir(r.job_id), uids_);
    }
    records_.Remove(r.job_id);
    common::LogWarn("stopped a job daemon an earlier agent left",
                    {{"job", std::to_string(r.job_id)},
                     {"attempt", std::to_string(r.attempt)},
                     {"processes", std::to_string(stopped)}});
  }
  return static_cast<int>(found.size());
}

RshBridge::~RshBridge() {
  std::vector<std::shared_ptr<RemoteDaemon>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    assignments_.clear();
    all = all_;
  }
  for (auto& d : all) d->Stop("agent shutting down");
  for (auto& d : all) {
    if (d->waiter_.joinable()) d->waiter_.join();
    if (d->killer_.joinable()) d->killer_.join();
  }
  std::vector<Preparer> preparers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    preparers.swap(preparers_);
  }
  for (Preparer& p : preparers) p.thread.join();
}

std::shared_ptr<RshBridge::ImagePrep> RshBridge::StartImagePrep(const api::Command& worker) {
  auto ref = ImageOf(worker.spec);
  if (ref.ok() && !*ref) return nullptr;
  auto prep = std::make_shared<ImagePrep>();
  if (!ref.ok()) {
    prep->done = true;
    prep->status = ref.status();
    return prep;
  }
  prep->name = (*ref)->name;
  if (options_.images == nullptr) {
    prep->done = true;
    prep->status = common::FailedPrecondition(
        "cannot prepare image " + prep->name + ": this node runs no images (its agent has no "
        "image cache)");
    return prep;
  }
  // Those done are joined now: a preparer's last act is setting its flag under mu_, held here.
  std::erase_if(preparers_, [](Preparer& p) {
    if (!*p.done) return false;
    p.thread.join();
    return true;
  });
  common::LogInfo("preparing image", {{"job", std::to_string(worker.job_id)},
                                      {"image", prep->name},
                                      {"digest", (*ref)->digest}});
  auto finished = std::make_shared<bool>(false);
  std::thread t([this, finished, held = prep, image = **ref]() mutable {
    auto use = options_.images->Acquire(image.digest, image.path);
    std::shared_ptr<ImagePrep> prep = std::move(held);  // released before the flag is set
    if (!use.ok()) {
      common::LogWarn("cannot prepare image",
                      {{"image", image.name}, {"error", use.status().message()}});
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (use.ok()) {
      prep->use = std::move(*use);
    } else {
      prep->status = common::FailedPrecondition("cannot prepare image " + image.name + ": " +
                                                use.status().message());
    }
    prep->done = true;
    // An assignment that ended meanwhile held the last other reference: the image goes now,
    // under mu_ (ImageUse's release takes only the cache's own lock).
    prep.reset();
    *finished = true;
  });
  preparers_.push_back({finished, std::move(t)});
  return prep;
}

common::Result<bool> RshBridge::ImageReady(int64_t job_id, const std::string& authorization) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = assignments_.find(job_id);
  if (it == assignments_.end()) return NoPartHere(job_id);
  EMBODY_RETURN_IF_ERROR(CheckJobToken(it->second.worker, authorization));
  const std::shared_ptr<ImagePrep>& image = it->second.image;
  if (!image) return true;
  if (!image->done) return false;
  if (!image->status.ok()) return image->status;
  return true;
}

std::string RshBridge::JobDir(int64_t job_id) const { return options_.jobs.JobDir(job_id); }

std::string RshBridge::LogDir(int64_t job_id) const { return options_.jobs.LogDir(job_id); }

void RshBridge::SetAssignments(const std::vector<api::Command>& workers) {
  std::vector<std::shared_ptr<RemoteDaemon>> ended;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::map<int64_t, Assignment> next;
    for (const api::Command& w : workers) {
      if (w.type != api::Command::Type::kWorker) continue;
      if (w.held) {
        // "Keep it as it is": only what this bridge holds in full, of that attempt. Anything
        // else is not listed in the next heartbeat, which brings it in full.
        auto it = assignments_.find(w.job_id);
        if (it != assignments_.end() && it->second.worker.attempt == w.attempt) {
          next[w.job_id] = it->second;
        }
        continue;
      }
      Assignment a;
      a.worker = w;
      auto it = assignments_.find(w.job_id);
      const bool same_attempt = it != assignments_.end() && it->second.worker.attempt == w.attempt;
      if (same_attempt && it->second.worker.job_token_sha256 == w.job_token_sha256) {
        a.daemon = it->second.daemon;
      }
      // The image of an attempt is prepared once, however often its assignment comes in full.
      a.image = same_attempt ? it->second.image : StartImagePrep(w);
      next[w.job_id] = std::move(a);
    }
    for (auto& [id, a] : assignments_) {
      auto n = next.find(id);
      if (a.daemon && (n == next.end() || n->second.daemon != a.daemon)) ended.push_back(a.daemon);
    }
    assignments_.swap(next);
  }
  for (auto& d : ended) d->Stop("the job's placement on this node ended");
}

std::vector<api::LaunchAck> RshBridge::HeldAssignments() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<api::LaunchAck> held;
  for (const auto& [id, a] : assignments_) held.push_back({id, a.worker.attempt});
  return held;
}

void RshBridge::Kill(int64_t job_id) {
  std::shared_ptr<RemoteDaemon> d;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = assignments_.find(job_id);
    if (it == assignments_.end()) return;
    d = it->second.daemon;
    assignments_.erase(it);
  }
  if (d) d->Stop("job killed");
}

std::vector<int64_t> RshBridge::Running() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int64_t> out;
  for (const auto& d : all_) {
    std::lock_guard<std::mutex> dl(d->mu_);
    if (!d->exit_code_) out.push_back(d->job_id_);
  }
  return out;
}

common::Result<std::shared_ptr<RemoteDaemon>> RshBridge::Start(int64_t job_id,
                                                               const std::string& authorization,
                                                               const std::string& body) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = assignments_.find(job_id);
  if (it == assignments_.end()) return NoPartHere(job_id);
  Assignment& a = it->second;
  EMBODY_RETURN_IF_ERROR(CheckJobToken(a.worker, authorization));
  if (body.size() > kMaxBodyBytes) return common::InvalidArgument("body too large");
  auto parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object() || !parsed.contains("argv") ||
      !parsed["argv"].is_array() || parsed["argv"].size() > kMaxDaemonWords) {
    return common::InvalidArgument("body must be {\"argv\": [words...]}", "argv");
  }
  std::vector<std::string> words;
  for (const auto& w : parsed["argv"]) {
    if (!w.is_string()) return common::InvalidArgument("argv must be strings", "argv");
    words.push_back(w.get<std::string>());
  }
  EMBODY_ASSIGN_OR_RETURN(command, ParseDaemonCommand(words));
  if (a.daemon) {
    std::lock_guard<std::mutex> dl(a.daemon->mu_);
    if (!a.daemon->exit_code_) {
      return common::Status(common::Code::kAlreadyExists,
                            "the job's daemon already runs on this node");
    }
  }
  // Daemons that ended are joined and forgotten here (a stream may still hold one to read its
  // last bytes), so the list holds at most the live ones and those just ended.
  std::erase_if(all_, [](const std::shared_ptr<RemoteDaemon>& d) {
    {
      std::lock_guard<std::mutex> dl(d->mu_);
      if (!d->exit_code_) return false;
    }
    if (d->waiter_.joinable()) d->waiter_.join();
    if (d->killer_.joinable()) d->killer_.join();
    return true;
  });
  if (live_ >= options_.max_daemons) {
    return common::Status(common::Code::kResourceExhausted,
                          "this node runs " + std::to_string(live_) + " job daemons already");
  }

  const api::Command& w = a.worker;
  const std::string id = std::to_string(job_id);
  const int local_ranks = w.hosts.empty() ? 1 : std::max(1, w.hosts[0].ranks);
  LaunchInput in = options_.jobs.LaunchInputFor(job_id);
  in.spec = w.spec;
  if (a.image) {
    // The head asks ImageReady before it starts mpirun; a request before that is early.
    if (!a.image->done) {
      return common::Unavailable("image " + a.image->name +
                                 " is still being prepared on this node");
    }
    if (!a.image->status.ok()) return a.image->status;
    ContainerPlan container;
    container.rootfs = a.image->use->rootfs();
    container.image = a.image->use->config();
    container.init = options_.container_init;
    container.crun = options_.crun;
    in.container = container;
  }

  Started started;
  std::optional<JobCredentials> creds;
  if (options_.jobs.sandbox.switch_uid) {
    EMBODY_ASSIGN_OR_RETURN(group, TenantGid(options_.jobs.sandbox, w.tenant_id));
    EMBODY_ASSIGN_OR_RETURN(uid, uids_->Acquire(job_id));
    started.uid = uid;
    creds = JobCredentials{uid, static_cast<gid_t>(uid), group};
  }
  auto fail = [&](const common::Status& st) -> common::Status {
    if (started.cgroup) (void)started.cgroup->Remove();
    if (started.uid) {
      if (started.network) RevokeJobNetwork(options_.jobs, *started.uid);
      LockDir(in.job_dir, uids_);
      uids_->Release(*started.uid);
    }
    if (started.gpus) options_.gpus->Release(DaemonGpuHolder(job_id));
    return st;
  };
  // This node's part of a gpu job gets GPUs of its own, as the head's part gets the head's: its
  // ranks see those (CUDA_VISIBLE_DEVICES in the daemon's environment, which its ranks inherit)
  // and its cgroup cannot open the others. A cpu job's part sees none.
  std::vector<int> gpus;
  if (options_.gpus && !options_.gpus->empty()) {
    auto taken = options_.gpus->Take(DaemonGpuHolder(job_id),
                                     IsGpuJob(w.spec) ? local_ranks * SlotsPerRank(w.spec) : 0);
    if (!taken.ok()) return fail(taken.status());
    gpus = *taken;
    started.gpus = !gpus.empty();
    in.cuda_visible_devices = JoinInts(gpus);
  }
  auto plan = BuildDaemonPlan(in, DaemonBinary(options_.jobs.mpirun, command.program),
                              DaemonArgsForNode(command, in.job_dir + "/ranks"));
  if (!plan.ok()) return fail(plan.status());
  // The head checked its own node; this one may lack the virtualenv.
  if (auto venv = PythonEnvironmentOf(w.spec); venv.ok() && !venv->empty()) {
    if (auto st = CheckVirtualenvFor(creds, *venv); !st.ok()) return fail(st);
  }
  // A fresh job directory for this daemon, as the head makes one for mpirun.
  const std::string daemons_dir = options_.jobs.data_dir + "/daemons";
  const std::string output_path = daemons_dir + "/job-" + id + ".out";
  common::Status st = MakePrivateDir(in.job_dir, creds);
  if (st.ok()) st = MakePrivateDir(in.job_dir + "/tmp", creds);
  if (st.ok()) st = MakePrivateDir(plan->ranks_dir, creds);
  if (st.ok()) st = common::WriteFileAtomic(in.job_dir + "/spec.json", w.spec.dump(2) + "\n");
  if (st.ok()) st = common::WriteFileAtomic(plan->command_path, plan->command);
  // crun, as the job's uid, cannot make mount points in the root-owned image: made here.
  if (st.ok() && in.container) st = options_.images->EnsureContainerMountpoints(plan->command, {});
  if (st.ok()) st = MakePrivateDir(LogDir(job_id), std::nullopt);
  if (st.ok()) st = common::MakeDirs(in.checkpoint_dir);
  if (st.ok() && creds) st = AdoptTree(in.checkpoint_dir, *creds, *uids_);
  if (st.ok()) st = common::MakeDirs(daemons_dir);
  if (st.ok() && ::chmod(daemons_dir.c_str(), 0700) != 0) st = common::Internal("chmod " + daemons_dir);
  if (!st.ok()) return fail(st);
  ::unlink(output_path.c_str());

  if (options_.jobs.cgroups.version != CgroupVersion::kNone) {
    CgroupLimits limits;
    limits.memory_bytes = MemoryPerRank(w.spec) * local_ranks;
    limits.cpus = local_ranks * SlotsPerRank(w.spec);
    limits.max_pids = options_.jobs.sandbox.max_processes;
    if (options_.gpus) limits.denied_gpus = options_.gpus->MinorsExcept(gpus);
    auto cg = JobCgroup::Create(options_.jobs.cgroups, job_id, limits);
    if (!cg.ok()) return fail(cg.status());
    started.cgroup = std::move(*cg);
  }

  SpawnRequest req;
  req.argv = plan->argv;
  req.env = EnvironmentStrings(plan->env);
  req.cwd = in.job_dir;
  req.output_path = output_path;
  if (started.cgroup) req.cgroup_procs = started.cgroup->ProcsFiles();
  req.limits = JobRlimits(options_.jobs.sandbox);
  req.no_new_privs = true;
  req.credentials = creds;
  if (started.uid && options_.jobs.network) {
    // The job's nodes, as the server placed it, and this one (an older server names no peers).
    std::vector<std::string> peers = w.peers;
    peers.push_back(options_.jobs.address);
    if (common::Status st = GrantJobNetwork(options_.jobs, *started.uid, peers, w.hosts);
        !st.ok()) {
      return fail(common::FailedPrecondition("cannot confine the job's network: " + st.message()));
    }
    started.network = true;
  }
  logs_->AddJob(job_id, in.job_dir, LogDir(job_id), TotalRanks(w.spec), started.uid, w.attempt,
                w.log_bytes);
  auto pid = SpawnInNewSession(req);
  if (!pid.ok()) {
    logs_->Collect(job_id, /*final=*/true);
    logs_->MarkFinished(job_id);
    return fail(pid.status());
  }
  // Where its processes are, for its watcher and for a restarted agent (StopLeftovers).
  JobRecord record;
  record.job_id = job_id;
  record.attempt = w.attempt;
  record.tenant = std::to_string(w.tenant_id);
  JobProcesses procs;
  procs.job_id = job_id;
  procs.launcher = ProcessIdOf(*pid);
  procs.launcher.pid = *pid;
  procs.uid = started.uid;
  if (started.cgroup) {
    procs.cgroup_version = options_.jobs.cgroups.version;
    procs.cgroup_dirs = started.cgroup->dirs();
  }
  record.processes = procs;
  if (!options_.jobs.rank_exec.empty()) {
    auto watcher = JobWatcher::Start(options_.jobs.rank_exec, LogDir(job_id) + "/daemon-watcher.log",
                                     procs, options_.orphan_grace, options_.jobs.kill_grace);
    if (watcher.ok()) {
      record.watcher = (*watcher)->id();
      started.watcher = std::move(*watcher);
    } else {
      // The daemon runs on; should this agent die, its restart still stops it (the record).
      common::LogWarn("cannot start the job daemon's watcher",
                      {{"job", id}, {"error", watcher.status().message()}});
    }
  }
  if (common::Status rec = records_.Save(record); !rec.ok()) {
    common::LogWarn("cannot record the job daemon", {{"job", id}, {"error", rec.message()}});
  }
  auto daemon = std::shared_ptr<RemoteDaemon>(new RemoteDaemon(job_id, options_.jobs.kill_grace));
  daemon->pid_ = *pid;
  daemon->output_fd_ = ::open(output_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  common::LogInfo("job daemon started", {{"job", id},
                                         {"attempt", std::to_string(w.attempt)},
                                         {"pid", std::to_string(*pid)},
                                         {"uid", started.uid ? std::to_string(*started.uid) : "agent's"}});
  a.daemon = daemon;
  all_.push_back(daemon);
  ++live_;
  daemon->waiter_ = std::thread(
      [this, daemon, s = std::make_shared<Started>(std::move(started))]() mutable {
        Reap(daemon, std::move(*s));
      });
  return daemon;
}

void RshBridge::Reap(std::shared_ptr<RemoteDaemon> d, Started started) {
  const pid_t pid = d->pid_;
  siginfo_t info{};
  // WNOWAIT: the daemon stays a zombie, so its session id is not reused while its leftovers die.
  while (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR) {
  }
  for (int round = 0; round < 50; ++round) {
    auto left = JobTree(ListProcesses(), pid, 0);
    std::erase_if(left, [&](const ProcessId& p) { return p.pid == pid; });
    if (left.empty() || SignalAll(left, SIGKILL) == 0) break;
    ::usleep(20 * 1000);
  }
  if (started.cgroup) started.cgroup->KillAll();
  if (started.uid) KillAllOfUid(*started.uid);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  // Nothing of it is left for its watcher or a restarted agent to stop.
  if (started.watcher) started.watcher->Release();
  records_.Remove(d->job_id_);
  logs_->Collect(d->job_id_, /*final=*/true);
  logs_->MarkFinished(d->job_id_);
  if (started.uid) {
    if (started.network) RevokeJobNetwork(options_.jobs, *started.uid);
    LockDir(JobDir(d->job_id_), uids_);
    LockDir(options_.jobs.CheckpointDir(d->job_id_), uids_);
    uids_->Release(*started.uid);
  }
  if (started.gpus) options_.gpus->Release(DaemonGpuHolder(d->job_id_));
  if (started.cgroup) {
    if (auto st = started.cgroup->Remove(); !st.ok()) {
      common::LogWarn("cannot remove the job daemon's cgroup",
                      {{"job", std::to_string(d->job_id_)}, {"error", st.message()}});
    }
  }
  const int code = WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                       : (WIFEXITED(status) ? WEXITSTATUS(status) : 1);
  common::LogInfo("job daemon ended",
                  {{"job", std::to_string(d->job_id_)}, {"exit_code", std::to_string(code)}});
  {
    std::lock_guard<std::mutex> lock(mu_);
    --live_;
  }
  std::lock_guard<std::mutex> lock(d->mu_);
  d->exit_code_ = code;
  d->changed_.notify_all();
}

}  // namespace agent
