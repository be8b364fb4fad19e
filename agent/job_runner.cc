#include "agent/job_runner.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <regex>
#include <set>

#include "agent/mpi_launch.h"
#include "agent/peer_images.h"
#include "agent/spawn.h"
#include "agent/uid_scrub.h"
#include "common/crypto.h"
#include "common/file_util.h"
#include "common/log.h"

namespace agent {
namespace {

// A TCP port no socket of this node holds now (0 when none can be had): bound on every address,
// as torch's TCPStore binds it, and released for the job's rank 0 to take.
int FreeTcpPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

constexpr size_t kRememberAcknowledged = 1024;

// Live processes of `ids` together with everything still descending from them.
std::vector<ProcessId> WithDescendants(const std::vector<ProcessEntry>& table,
                                       const std::vector<ProcessId>& ids) {
  std::vector<ProcessId> out;
  std::set<pid_t> seen;
  for (const auto& id : ids) {
    if (!IsAlive(id)) continue;
    if (seen.insert(id.pid).second) out.push_back(id);
    for (const auto& d : JobTree(table, 0, id.pid)) {
      if (seen.insert(d.pid).second) out.push_back(d);
    }
  }
  return out;
}

// What the launch needs from the JobSpec's resources (the server validated them; anything odd
// here falls back to the defaults).
struct LocalResources {
  bool gpu = false;
  int slots_per_rank = 1;
  int64_t memory_per_rank_bytes = 0;
};

LocalResources ResourcesOf(const nlohmann::json& spec) {
  LocalResources r;
  if (!spec.is_object() || !spec.contains("resources") || !spec["resources"].is_object()) return r;
  const auto& res = spec["resources"];
  auto str = res.find("slot_type");
  r.gpu = str != res.end() && str->is_string() && str->get<std::string>() == "gpu";
  auto slots = res.find("slots_per_rank");
  if (slots != res.end() && slots->is_number_integer()) {
    r.slots_per_rank = std::clamp<int64_t>(slots->get<int64_t>(), 1, 1 << 16);
  }
  auto mem = res.find("memory_per_rank_bytes");
  if (mem != res.end() && mem->is_number_integer()) {
    r.memory_per_rank_bytes = std::max<int64_t>(0, mem->get<int64_t>());
  }
  return r;
}

// Below this much room for unprivileged writers, a file system counts as full: what a job that
// failed there saw was most likely ENOSPC (or EDQUOT), and its reason should say so.
constexpr uint64_t kFullBelowBytes = 256 * 1024;

// " (no space left on the file system of DIR)" for the first of `dirs` whose file system is
// full, else "".
std::string DiskFullNote(const std::vector<std::string>& dirs) {
  for (const auto& dir : dirs) {
    struct statvfs fs {};
    if (::statvfs(dir.c_str(), &fs) != 0) continue;
    const uint64_t room = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
    if (room < kFullBelowBytes || (fs.f_files > 0 && fs.f_favail == 0)) {
      return " (no space left on the file system of " + dir + ")";
    }
  }
  return "";
}

std::string JoinInts(const std::vector<int>& v) {
  std::string out;
  for (int i : v) out += (out.empty() ? "" : ",") + std::to_string(i);
  return out;
}

}  // namespace

ExitDescription DescribeWaitStatus(int status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return {128 + sig, "killed by signal " + std::to_string(sig)};
  }
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  return {code, "exited with code " + std::to_string(code)};
}

JobRunner::JobRunner(JobRunnerOptions options, RankLogs* logs)
    : options_(std::move(options)),
      logs_(logs),
      records_(options_.jobs.data_dir + "/running"),
      own_uids_(options_.jobs.sandbox),
      uids_(options_.uid_pool != nullptr ? *options_.uid_pool : own_uids_) {
  // What a finished job left in /tmp, /dev/shm and System V IPC goes before its uid is handed
  // out again. Never the agent's data directory nor the dataset root (either may sit under /tmp):
  // an import's staging output is the job uid's until PublishImport gives it to root.
  std::vector<std::string> keep{options_.jobs.data_dir};
  if (!options_.dataset_root.empty()) keep.push_back(options_.dataset_root);
  uids_.ScrubBeforeReuse(SharedScratchRoots(), keep);
}

JobRunner::~JobRunner() {
  KillAllAndWait("agent shutting down");
  std::map<int64_t, std::unique_ptr<Job>> jobs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs.swap(jobs_);
  }
  for (auto& [id, job] : jobs) JoinThreads(job.get());
}

void JobRunner::SetOnFinish(std::function<void(int64_t)> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  on_finish_ = std::move(fn);
}

void JobRunner::Launch(const api::Command& launch) {
  std::unique_lock<std::mutex> lock(mu_);
  // The server repeats a launch until this node acknowledges it (HeartbeatRequest::launched), so
  // the same launch may arrive again while the job is here: it is a no-op, never a second mpirun.
  // Once its end is acknowledged the server sends it no more; a launch of the same attempt after
  // that is a new placement (a preempted job goes back to the queue with its attempt unchanged).
  if (auto it = jobs_.find(launch.job_id); it != jobs_.end()) {
    if (it->second->attempt != launch.attempt || !it->second->from_launch) {
      // Another attempt while this one is still here (the server does not know yet that it
      // ended): the job is already handled here.
      common::LogWarn("ignoring launch of a job this node already has",
                      {{"job", std::to_string(launch.job_id)},
                       {"attempt", std::to_string(launch.attempt)},
                       {"held_attempt", std::to_string(it->second->attempt)}});
    }
    return;
  }
  auto job = std::make_unique<Job>();
  job->id = launch.job_id;
  job->attempt = launch.attempt;
  job->from_launch = true;
  job->tenant = launch.tenant;
  job->received = std::chrono::steady_clock::now();
  Job* j = job.get();
  jobs_[launch.job_id] = std::move(job);
  std::erase(recently_acknowledged_, launch.job_id);
  // Written before anything starts: an agent restarted from here on knows it held the launch.
  if (common::Status st = SaveRecord(*j); !st.ok()) {
    return Finish(j, 1, "cannot record the job on this node: " + st.message());
  }
  auto image = ImageOf(launch.spec);
  if (!image.ok()) return Finish(j, 1, image.status().message());
  if (*image) {
    j->running = true;
    j->preparing = true;
    j->preparer = std::thread(
        [this, j, launch, ref = **image] { PrepareImageThenStart(j, launch, ref); });
    return;
  }
  if (NeedsFetch(launch)) {
    j->running = true;
    j->preparing = true;
    j->preparer = std::thread([this, j, launch] { FetchThenStart(j, launch); });
    return;
  }
  Start(j, launch, lock);
}

void JobRunner::PrepareImageThenStart(Job* job, api::Command launch, const ImageRef& image) {
  common::Result<std::unique_ptr<ImageUse>> use =
      common::FailedPrecondition("this node runs no images (its agent has no image cache)");
  if (options_.images != nullptr) {
    common::LogInfo("preparing image", {{"job", std::to_string(job->id)},
                                        {"image", image.name},
                                        {"digest", image.digest}});
    use = options_.images->Acquire(image.digest, image.path);
  }
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (!use.ok()) {
      job->preparing = false;
      return Finish(job, 1, "cannot prepare image " + image.name + ": " + use.status().message());
    }
    job->image = std::move(*use);
    if (job->kill_requested) {
      job->preparing = false;
      return Finish(job, 128 + SIGKILL, job->kill_reason);
    }
  }
  if (launch.hosts.size() > 1) {
    // Every other node unpacks the image itself (agent/rsh_bridge.h): mpirun starts once all
    // have it, or the job fails naming the node that cannot.
    PeerImageWait wait;
    wait.nodes.assign(launch.hosts.begin() + 1, launch.hosts.end());
    wait.job_id = job->id;
    wait.job_token = launch.job_token;
    wait.ca_file = options_.jobs.ca_file;
    wait.image = image.name;
    common::Status peers = WaitForImageOnNodes(wait, [this, job] {
      std::lock_guard<std::mutex> lock(mu_);
      return job->kill_requested;
    });
    std::unique_lock<std::mutex> lock(mu_);
    if (job->kill_requested) {
      job->preparing = false;
      return Finish(job, 128 + SIGKILL, job->kill_reason);
    }
    if (!peers.ok()) {
      job->preparing = false;
      return Finish(job, 1, peers.message());  // "node NAME: cannot prepare image ...: why"
    }
  }
  if (NeedsFetch(launch)) return FetchThenStart(job, std::move(launch));
  std::unique_lock<std::mutex> lock(mu_);
  job->preparing = false;
  Start(job, launch, lock);
}

bool JobRunner::NeedsFetch(const api::Command& launch) const {
  if (UploadOf(launch.spec)) return static_cast<bool>(options_.fetch_upload);
  const api::CheckpointRef& ref = launch.resume_checkpoint;
  if (ref.id == 0 || !options_.fetch_checkpoint) return false;
  // The job's own checkpoint at resume_from, still readable here (the same node, or storage
  // both nodes see) and at least as new as the uploaded one (uploads trail the engine), wins;
  // Start checks again that the job's uid can read it.
  if (ref.job_id != launch.job_id || launch.resume_from.empty()) return true;
  static const std::regex kStep(R"(step-(\d{1,18})\.ckpt)");
  std::smatch m;
  const std::string name = std::filesystem::path(launch.resume_from).filename().string();
  return !(std::regex_match(name, m, kStep) && std::stoll(m[1].str()) >= ref.step &&
           ::access(launch.resume_from.c_str(), R_OK) == 0);
}

void JobRunner::FetchUploadThenStart(Job* job, api::Command launch, const UploadRef& ref) {
  // Root's private directory: no job of this node reads the copy before it is the job's own.
  const std::string dir = DownloadDir(job->id);
  const std::string fetched = dir + "/" + UploadFileName(launch.spec);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  common::Status st = common::MakeDirs(dir);
  if (st.ok() && ::chmod(dir.c_str(), 0700) != 0) st = common::Internal("cannot chmod " + dir);
  if (st.ok()) {
    common::LogInfo("fetching dataset upload", {{"job", std::to_string(job->id)},
                                                {"dataset", std::to_string(ref.dataset_id)},
                                                {"bytes", std::to_string(ref.bytes)}});
    st = options_.fetch_upload(ref, fetched);
  }
  std::unique_lock<std::mutex> lock(mu_);
  job->preparing = false;
  job->upload_fetched = fetched;
  job->upload_copy = JobDir(job->id) + "/" + UploadFileName(launch.spec);
  if (job->kill_requested) return Finish(job, 128 + SIGKILL, job->kill_reason);
  if (!st.ok()) {
    common::LogWarn("cannot fetch dataset upload",
                    {{"job", std::to_string(job->id)}, {"error", st.ToString()}});
    return Finish(job, 1, "cannot fetch the upload of dataset " + std::to_string(ref.dataset_id) +
                              ": " + st.message());
  }
  launch.spec = SpecReadingCopy(launch.spec, job->upload_copy);
  Start(job, launch, lock);
}

void JobRunner::FetchThenStart(Job* job, api::Command launch) {
  if (auto up = UploadOf(launch.spec)) return FetchUploadThenStart(job, std::move(launch), *up);
  const api::CheckpointRef ref = launch.resume_checkpoint;
  const std::string id = std::to_string(job->id);
  const std::string dir = DownloadDir(job->id);
  const std::string path = dir + "/step-" + std::to_string(ref.step) + ".ckpt";
  common::Status st = common::MakeDirs(dir);
  // Root's directory, traversable: the job reads the file, and cannot replace it.
  if (st.ok() && ::chmod(dir.c_str(), 0711) != 0) st = common::Internal("cannot chmod " + dir);
  if (st.ok()) {
    common::LogInfo("fetching checkpoint", {{"job", id},
                                            {"checkpoint", std::to_string(ref.id)},
                                            {"step", std::to_string(ref.step)},
                                            {"bytes", std::to_string(ref.bytes)}});
    st = options_.fetch_checkpoint(ref, path);
  }
  std::unique_lock<std::mutex> lock(mu_);
  job->preparing = false;
  if (job->kill_requested) return Finish(job, 128 + SIGKILL, job->kill_reason);
  if (!st.ok()) {
    common::LogWarn("cannot fetch checkpoint", {{"job", id}, {"error", st.ToString()}});
    return Finish(job, 1, "cannot fetch checkpoint " + std::to_string(ref.id) + " (step " +
                              std::to_string(ref.step) + "): " + st.message());
  }
  launch.resume_from = path;
  Start(job, launch, lock);
}

std::string JobRunner::DownloadDir(int64_t job_id) const {
  return options_.jobs.DownloadDir(job_id);
}

std::string JobRunner::JobDir(int64_t job_id) const { return options_.jobs.JobDir(job_id); }

std::string JobRunner::LogDir(int64_t job_id) const { return options_.jobs.LogDir(job_id); }

std::vector<int> JobRunner::GpusInUse() const {
  return options_.gpus ? options_.gpus->InUse() : std::vector<int>{};
}

// Gives the job its uid, GPUs, directories and cgroup and starts mpirun, or records why it could
// not. `lock` holds mu_ on entry and on return; SpawnJob runs without it.
void JobRunner::Start(Job* job, const api::Command& launch, std::unique_lock<std::mutex>& lock) {
  std::string id = std::to_string(job->id);
  const LocalResources res = ResourcesOf(launch.spec);
  // Ranks on this node's address run here; those of other hosts get their limits there.
  int local_ranks = 0;
  for (const auto& h : launch.hosts) {
    if (h.address == options_.jobs.address) local_ranks += std::max(0, h.ranks);
  }

  LaunchInput in = options_.jobs.LaunchInputFor(job->id);
  in.spec = launch.spec;
  in.hosts = launch.hosts;
  in.embody_data = options_.embody_data;
  in.agent_url = options_.agent_url;
  // The server's token for this attempt, which the job's daemons on other nodes are checked
  // against (docs/multinode.md); an older server sends none.
  in.job_token = launch.job_token.empty() ? common::RandomToken() : launch.job_token;
  if (launch.spec.is_object() && launch.spec.value("kind", "") == "command") {
    // A port for torch.distributed's rendezvous store, free now on this node (rank 0 runs here
    // and binds it); a job that does not use it loses nothing.
    in.master_port = FreeTcpPort();
  }
  if (UploadOf(launch.spec)) return Finish(job, 1, "this agent cannot fetch dataset uploads");
  if (launch.spec.is_object() && launch.spec.value("kind", "") == "import") {
    auto paths = ImportPathsFor(options_.dataset_root, launch.tenant_id, launch.spec);
    if (!paths.ok()) return Finish(job, 1, paths.status().message());
    // Said here, where the node knows why, rather than as exec-rank's exit 127.
    if (::access(options_.embody_data.c_str(), X_OK) != 0) {
      return Finish(job, 1, "this node cannot run imports: no embody-data at " +
                                options_.embody_data +
                                " (build it, or start embody-agent with --embody-data PATH)");
    }
    job->import = *paths;
    in.import_output = paths->output_dir;
    in.import_archive = !job->upload_fetched.empty();
  }
  if (job->image) {
    // Every rank runs in the image (agent/container_config.h); the binds are added by the plan.
    ContainerPlan container;
    container.rootfs = job->image->rootfs();
    container.init = options_.container_init;
    container.crun = options_.crun;
    in.container = container;
  }
  auto plan = BuildLaunchPlan(in);
  if (!plan.ok()) return Finish(job, 1, plan.status().message());

  std::optional<JobCredentials> creds;
  if (options_.jobs.sandbox.switch_uid) {
    // The tenant's group opens its datasets and nothing else; a tenant without one never runs.
    auto group = TenantGid(options_.jobs.sandbox, launch.tenant_id);
    if (!group.ok()) return Finish(job, 1, group.status().message());
    auto uid = uids_.Acquire(job->id);
    if (!uid.ok()) return Finish(job, 1, uid.status().message());
    job->uid = *uid;
    creds = JobCredentials{*uid, static_cast<gid_t>(*uid), *group};
  }
  if (auto venv = PythonEnvironmentOf(launch.spec); venv.ok() && !venv->empty()) {
    // Said here, as the job's error, rather than as a rank's "python3: not found".
    if (auto st = CheckVirtualenvFor(creds, *venv); !st.ok()) {
      ReleaseResources(job);
      return Finish(job, 1, st.message());
    }
  }
  if (options_.gpus && !options_.gpus->empty()) {
    // A cpu job sees no GPU; a gpu job sees the ones it was given, no other job's.
    auto taken = options_.gpus->Take(HeadGpuHolder(job->id),
                                     res.gpu ? local_ranks * res.slots_per_rank : 0);
    if (!taken.ok()) {
      ReleaseResources(job);
      return Finish(job, 1, taken.status().message());
    }
    job->gpus = *taken;
    in.cuda_visible_devices = JoinInts(job->gpus);
  }
  CgroupLimits limits;
  if (res.memory_per_rank_bytes > 0) {
    if (options_.jobs.cgroups.version != CgroupVersion::kNone) {
      limits.memory_bytes = res.memory_per_rank_bytes * local_ranks;
      job->memory_limit_bytes = limits.memory_bytes;
    } else {
      in.address_space_bytes = res.memory_per_rank_bytes;
    }
  }
  if (!res.gpu) limits.cpus = local_ranks * res.slots_per_rank;
  limits.max_pids = options_.jobs.sandbox.max_processes;
  if (options_.gpus) limits.denied_gpus = options_.gpus->MinorsExcept(job->gpus);
  plan = BuildLaunchPlan(in);  // again, with the GPUs and limits now known
  if (!plan.ok()) {
    ReleaseResources(job);
    return Finish(job, 1, plan.status().message());
  }

  // What follows writes files, makes the cgroup and forks mpirun: tens of milliseconds in which
  // the runner's lock is not held, so the other slots' ends, the heartbeat and the local API
  // do not wait on this start. The job is held meanwhile as preparing (a kill waits for it).
  job->running = true;
  job->preparing = true;
  lock.unlock();
  SpawnResult spawned = SpawnJob(job, launch, in, *plan, creds, limits);
  lock.lock();
  job->preparing = false;
  if (!spawned.error.empty()) {
    ReleaseResources(job);
    return Finish(job, spawned.exit_code, spawned.error);
  }
  job->pid = spawned.pid;
  job->token = in.job_token;
  common::LogInfo("job launched",
                  {{"job", id},
                   {"attempt", std::to_string(job->attempt)},
                   {"pid", std::to_string(job->pid)},
                   {"ranks", std::to_string(plan->total_ranks)},
                   {"uid", job->uid ? std::to_string(*job->uid) : "agent's"},
                   {"cgroup", job->cgroup ? job->cgroup->dirs().front() : "none"},
                   {"gpus", in.cuda_visible_devices.value_or("none")}});
  job->waiter = std::thread([this, job] { Wait(job); });
  if (job->kill_requested) job->killer = std::thread([this, job] { KillTree(job); });
}

JobRunner::SpawnResult JobRunner::SpawnJob(Job* job, const api::Command& launch, LaunchInput in,
                                           LaunchPlan plan,
                                           const std::optional<JobCredentials>& creds,
                                           const CgroupLimits& limits) {
  const std::string id = std::to_string(job->id);
  common::Status st = PrepareDirs(job, launch, plan, creds);
  if (st.ok() && !job->upload_fetched.empty()) {
    st = HandUploadToJob(job->upload_fetched, job->upload_copy, creds);
  }
  if (!st.ok()) return {0, 1, "cannot prepare job directory: " + st.message()};
  if (job->image) {
    // crun, as the job's uid, cannot make mount points in the root-owned image: made here.
    // resume_from may add its directory below (the plan is rebuilt): bind it too.
    std::vector<std::string> dirs;
    if (!launch.resume_from.empty()) {
      dirs.push_back(std::filesystem::path(launch.resume_from).parent_path().string());
    }
    st = options_.images->EnsureContainerMountpoints(plan.command, dirs);
    if (!st.ok()) return {0, 1, "cannot run the job's image: " + st.message()};
  }
  if (!launch.resume_from.empty()) {
    // Checkpoints live on the disk of the node that wrote them: resume only where the job can
    // read them (the file, or its directory when the run has since written newer ones and pruned
    // it; the engine then takes the newest), and say in the launcher log which way it starts.
    const std::string& file = launch.resume_from;
    const std::string dir = std::filesystem::path(file).parent_path().string();
    auto readable = [&](const std::string& path, bool is_dir) {
      if (creds) return CanReadAs(*creds, path, is_dir);
      return ::access(path.c_str(), R_OK | (is_dir ? X_OK : 0)) == 0;
    };
    std::string note;
    if (readable(file, false) || (!dir.empty() && readable(dir, true))) {
      in.resume_from = file;
      note = "embody-agent: resuming from " + file;
      if (launch.resume_checkpoint.id != 0 && dir == DownloadDir(job->id)) {
        note += " (checkpoint " + std::to_string(launch.resume_checkpoint.id) + " of job " +
                std::to_string(launch.resume_checkpoint.job_id) + ", fetched from the server)";
      }
      note += "\n";
      auto resumed = BuildLaunchPlan(in);
      if (!resumed.ok()) return {0, 1, "cannot prepare job directory: " + resumed.status().message()};
      plan = std::move(*resumed);
    } else {
      note = "embody-agent: checkpoint " + file +
             " is not readable on this node; starting from step 0\n";
      common::LogWarn("checkpoint not readable here, starting from step 0",
                      {{"job", id}, {"checkpoint", file}});
    }
    // The launcher log is opened for appending by the spawn below, after this note.
    st = common::WriteFileAtomic(RankLogs::RankLogPath(LogDir(job->id), -1), note, 0640);
    if (!st.ok()) return {0, 1, "cannot prepare job directory: " + st.message()};
  }

  if (options_.jobs.cgroups.version != CgroupVersion::kNone) {
    auto cg = JobCgroup::Create(options_.jobs.cgroups, job->id, limits);
    if (!cg.ok()) return {0, 1, "cannot create the job's cgroup: " + cg.status().message()};
    job->cgroup = std::move(*cg);
  }

  logs_->AddJob(job->id, in.job_dir, LogDir(job->id), plan.total_ranks, job->uid, job->attempt,
                launch.log_bytes);
  SpawnRequest req;
  req.argv = plan.argv;
  req.env = EnvironmentStrings(plan.env);
  req.cwd = in.job_dir;
  req.output_path = RankLogs::RankLogPath(LogDir(job->id), -1);
  if (job->cgroup) req.cgroup_procs = job->cgroup->ProcsFiles();
  req.limits = JobRlimits(options_.jobs.sandbox);
  req.no_new_privs = true;
  req.credentials = creds;
  MarkPhase(*job, &job->timings.sandbox_prepared_ms);
  auto pid = SpawnInNewSession(req);
  if (pid.ok()) MarkPhase(*job, &job->timings.process_started_ms);
  if (!pid.ok()) {
    logs_->Collect(job->id, /*final=*/true);
    logs_->MarkFinished(job->id);
    return {0, 127, pid.status().message()};
  }
  JobProcesses procs;
  procs.job_id = job->id;
  procs.launcher = ProcessIdOf(*pid);
  procs.launcher.pid = *pid;
  procs.uid = job->uid;
  if (job->cgroup) {
    procs.cgroup_version = options_.jobs.cgroups.version;
    procs.cgroup_dirs = job->cgroup->dirs();
  }
  job->processes = procs;
  if (!options_.jobs.rank_exec.empty()) {
    auto watcher = JobWatcher::Start(options_.jobs.rank_exec, LogDir(job->id) + "/watcher.log",
                                     procs, options_.orphan_grace, options_.jobs.kill_grace);
    if (watcher.ok()) {
      job->watcher = std::move(*watcher);
    } else {
      // The job runs on; should this agent die, its restart still stops it (the record below).
      common::LogWarn("cannot start the job's watcher",
                      {{"job", id}, {"error", watcher.status().message()}});
    }
  }
  if (common::Status rec = SaveRecord(*job); !rec.ok()) {
    common::LogWarn("cannot record the job's processes", {{"job", id}, {"error", rec.message()}});
  }
  return {*pid, 0, ""};
}

common::Status JobRunner::PrepareDirs(Job* job, const api::Command& launch,
                                      const LaunchPlan& plan,
                                      const std::optional<JobCredentials>& creds) {
  // A new attempt starts from an empty job directory: its logs restart at offset 0. The files the
  // agent writes there stay root's (readable); what the job writes is its own.
  const std::string job_dir = JobDir(job->id);
  EMBODY_RETURN_IF_ERROR(MakePrivateDir(job_dir, creds));
  EMBODY_RETURN_IF_ERROR(MakePrivateDir(job_dir + "/tmp", creds));
  EMBODY_RETURN_IF_ERROR(MakePrivateDir(plan.ranks_dir, creds));
  EMBODY_RETURN_IF_ERROR(WriteLaunchFile(job_dir + "/spec.json", launch.spec.dump(2) + "\n"));
  EMBODY_RETURN_IF_ERROR(WriteLaunchFile(plan.hostfile_path, plan.hostfile));
  EMBODY_RETURN_IF_ERROR(WriteLaunchFile(plan.command_path, plan.command));
  if (!plan.rsh_hosts.empty()) {
    EMBODY_RETURN_IF_ERROR(WriteLaunchFile(plan.rsh_hosts_path, plan.rsh_hosts));
  }
  EMBODY_RETURN_IF_ERROR(MakePrivateDir(LogDir(job->id), std::nullopt));
  // A new attempt on this node writes its logs afresh: what an earlier attempt wrote is on the
  // server, in that attempt's files; this attempt's start at offset 0 (api::LogChunk::attempt).
  {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(LogDir(job->id), ec)) {
      if (entry.is_regular_file(ec)) std::filesystem::remove(entry.path(), ec);
    }
  }
  if (job->import) EMBODY_RETURN_IF_ERROR(PrepareImport(*job->import, creds));
  const std::string checkpoints = options_.jobs.CheckpointDir(job->id);
  EMBODY_RETURN_IF_ERROR(common::MakeDirs(checkpoints));
  if (creds) return AdoptTree(checkpoints, *creds, uids_);
  return common::Status::Ok();
}

void JobRunner::ReleaseResources(Job* job) {
  if (job->uid) uids_.Release(*job->uid);
  job->uid.reset();
  if (!job->gpus.empty() && options_.gpus) options_.gpus->Release(HeadGpuHolder(job->id));
  job->gpus.clear();
  if (job->cgroup) {
    if (auto st = job->cgroup->Remove(); !st.ok()) {
      common::LogWarn("cannot remove the job's cgroup",
                      {{"job", std::to_string(job->id)}, {"error", st.message()}});
    }
    job->cgroup.reset();
  }
}

void JobRunner::Finish(Job* job, int exit_code, const std::string& reason) {
  job->running = false;
  job->image.reset();  // the cache may evict it now
  if (!job->upload_fetched.empty()) {
    // The server keeps the upload until the import ended; the node keeps no copy past the job.
    ::unlink(job->upload_fetched.c_str());
    ::unlink(job->upload_copy.c_str());
  }
  // Every caller has given the job's uid, GPUs and cgroup back by now.
  MarkPhase(*job, &job->timings.slot_freed_ms);
  job->result = {job->id, exit_code, reason, job->kill_requested};
  job->result.timings = job->timings;
  job->ended = true;
  if (common::Status st = SaveRecord(*job); !st.ok()) {
    common::LogWarn("cannot record the job's end", {{"job", std::to_string(job->id)},
                                                    {"error", st.message()}});
  }
  common::LogInfo("job finished", {{"job", std::to_string(job->id)},
                                   {"exit_code", std::to_string(exit_code)},
                                   {"reason", reason}});
  changed_.notify_all();
}

common::Status JobRunner::SaveRecord(const Job& job) const {
  if (!job.from_launch) return common::Status::Ok();
  JobRecord r;
  r.job_id = job.id;
  r.attempt = job.attempt;
  r.tenant = job.tenant;
  r.processes = job.processes;
  if (job.watcher) r.watcher = job.watcher->id();
  if (job.ended) r.finished = job.result;
  return records_.Save(r);
}

int JobRunner::Reconcile() {
  std::vector<JobRecord> found = records_.LoadAll();
  for (JobRecord& r : found) {
    auto job = std::make_unique<Job>();
    job->id = r.job_id;
    job->attempt = r.attempt;
    job->from_launch = true;
    job->tenant = r.tenant;
    job->processes = r.processes;
    job->ended = true;
    if (r.finished) {
      // It ended under the earlier agent, which may not have told the server.
      job->result = *r.finished;
      job->result.job_id = r.job_id;
    } else {
      // Its watcher first, so that nothing else acts on the job while it is stopped here.
      if (r.watcher.pid > 0) SignalAll({r.watcher}, SIGKILL);
      int stopped = 0;
      if (r.processes) {
        stopped = StopJobProcesses(*r.processes, options_.jobs.kill_grace);
        LockDir(JobDir(r.job_id), &uids_);
        LockDir(options_.jobs.CheckpointDir(r.job_id), &uids_);
      }
      std::error_code ec;
      std::filesystem::remove_all(DownloadDir(r.job_id), ec);
      job->result = {r.job_id, 128 + SIGKILL,
                     "lost: the agent restarted while the job ran, and stopped " +
                         std::to_string(stopped) + " of its processes",
                     /*killed=*/false, /*lost=*/true};
    }
    common::LogWarn("reconciled a job an earlier agent held",
                    {{"job", std::to_string(r.job_id)},
                     {"attempt", std::to_string(r.attempt)},
                     {"report", job->result.reason}});
    std::lock_guard<std::mutex> lock(mu_);
    if (jobs_.count(r.job_id)) continue;
    if (common::Status st = SaveRecord(*job); !st.ok()) {
      common::LogWarn("cannot record the job's end", {{"job", std::to_string(r.job_id)},
                                                      {"error", st.message()}});
    }
    jobs_[r.job_id] = std::move(job);
  }
  return static_cast<int>(found.size());
}

int JobRunner::PruneFinishedDirs(std::chrono::seconds max_age) {
  static const std::regex kJobDir(R"(job-(\d{1,18}))");
  std::set<int64_t> held;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, job] : jobs_) held.insert(id);
  }
  // A job held by a record but not (yet) by this runner: Reconcile has not run.
  for (const JobRecord& r : records_.LoadAll()) held.insert(r.job_id);
  const auto cutoff = std::filesystem::file_time_type::clock::now() - max_age;
  int removed = 0;
  for (const char* kind : {"jobs", "logs", "checkpoints", "downloads"}) {
    std::error_code ec;
    for (const auto& e :
         std::filesystem::directory_iterator(options_.jobs.data_dir + "/" + kind, ec)) {
      std::smatch m;
      const std::string name = e.path().filename().string();
      if (!std::regex_match(name, m, kJobDir) || held.count(std::stoll(m[1].str()))) continue;
      std::error_code st;
      if (e.is_symlink(st) || !e.is_directory(st)) continue;
      auto when = std::filesystem::last_write_time(e.path(), st);
      if (st || when > cutoff) continue;
      std::filesystem::remove_all(e.path(), st);
      if (st) {
        common::LogWarn("cannot remove a finished job's directory",
                        {{"dir", e.path().string()}, {"error", st.message()}});
        continue;
      }
      ++removed;
    }
  }
  if (removed > 0) {
    common::LogInfo("removed finished jobs' directories", {{"directories", std::to_string(removed)}});
  }
  return removed;
}

void JobRunner::Wait(Job* job) {
  // WNOWAIT leaves mpirun a zombie: its pid, and so its session id, cannot be reused while the
  // leftovers of its tree are being killed.
  siginfo_t info{};
  while (::waitid(P_PID, static_cast<id_t>(job->pid), &info, WEXITED | WNOWAIT) != 0 &&
         errno == EINTR) {
  }
  MarkPhase(*job, &job->timings.exited_ms);
  if (job->cgroup) {
    // Every process the job made is in its cgroup (none can leave it), so its member list is
    // the whole of what is left, read without a walk of /proc; rounds, since a process can fork
    // between the read and the signal. mpirun, a zombie now, is no longer listed.
    for (int round = 0; round < 50; ++round) {
      std::vector<pid_t> left = job->cgroup->Pids();
      std::erase(left, job->pid);
      if (left.empty()) break;
      for (pid_t p : left) ::kill(p, SIGKILL);
      ::usleep(20 * 1000);
    }
  } else {
    std::vector<ProcessId> snapshot;  // what a kill found, some of which may have left the tree
    {
      std::lock_guard<std::mutex> lock(mu_);
      snapshot = job->kill_snapshot;
    }
    for (int round = 0; round < 50; ++round) {
      auto table = ListProcesses();
      auto left = JobTree(table, job->pid, 0);
      for (const auto& p : WithDescendants(table, snapshot)) left.push_back(p);
      std::erase_if(left, [&](const ProcessId& p) { return p.pid == job->pid; });
      if (left.empty() || SignalAll(left, SIGKILL) == 0) break;
      ::usleep(20 * 1000);
    }
  }
  // What left the tree (a daemon that double-forked) is still in the job's cgroup and still
  // runs as the job's uid. Only this waiter touches job->uid and job->cgroup while it runs.
  if (job->cgroup) job->cgroup->KillAll();
  if (job->uid) KillAllOfUid(*job->uid);
  int status = 0;
  while (::waitpid(job->pid, &status, 0) < 0 && errno == EINTR) {
  }
  // Nothing of the job is left for the watcher to stop.
  if (job->watcher) job->watcher->Release();
  bool memory_limit_hit = job->cgroup && job->cgroup->MemoryLimitHit();
  logs_->Collect(job->id, /*final=*/true);
  logs_->MarkFinished(job->id);
  // A full disk under the job's checkpoints, its directory or its logs: said in its reason, the
  // one place a user looks first (the job's own message may be in the log that could not be
  // written).
  const std::string full_note =
      DiskFullNote({options_.jobs.CheckpointDir(job->id), JobDir(job->id), LogDir(job->id)});
  std::string log_note;
  if (std::string err = logs_->WriteError(job->id); !err.empty()) {
    log_note = " (its log is incomplete: " + err + ")";
  }
  // The finished job's directories are nobody's until its next attempt: the next job given the
  // same uid finds nothing.
  if (job->uid) {
    LockDir(JobDir(job->id), &uids_);
    LockDir(options_.jobs.CheckpointDir(job->id), &uids_);
  }
  {
    std::error_code ec;
    std::filesystem::remove_all(DownloadDir(job->id), ec);  // the server still has it
  }

  ExitDescription d = DescribeWaitStatus(status);
  if (memory_limit_hit) {
    d.reason += " (memory limit of " + std::to_string(job->memory_limit_bytes) + " bytes reached)";
  }
  if (d.exit_code != 0) d.reason += full_note;
  d.reason += log_note;
  if (job->import) {
    // Every process of the job's uid is gone: its output can no longer change under us.
    if (d.exit_code == 0 && !job->kill_requested) {
      if (common::Status st = PublishImport(*job->import); !st.ok()) {
        DiscardImport(*job->import);
        d = {1, "cannot publish the dataset: " + st.message()};
      }
    } else {
      DiscardImport(*job->import);
    }
  }
  std::function<void(int64_t)> on_finish;
  {
    std::lock_guard<std::mutex> lock(mu_);
      ReleaseResources(job);
      Finish(job, d.exit_code, job->kill_requested ? job->kill_reason : d.reason);
      on_finish = on_finish_;
  }
  if (on_finish) on_finish(job->id);
}

void JobRunner::Kill(int64_t job_id, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) {
    for (int64_t done : recently_acknowledged_) {
      if (done == job_id) return;
    }
    auto job = std::make_unique<Job>();
    job->id = job_id;
    Finish(job.get(), 128 + SIGKILL, reason + " (was not running on this node)");
    jobs_[job_id] = std::move(job);
    return;
  }
  Job* job = it->second.get();
  if (!job->running || job->kill_requested) return;
  job->kill_requested = true;
  job->kill_reason = reason;
  if (job->preparing) return;  // nothing runs yet; the preparer ends it instead of starting it
  job->killer = std::thread([this, job] { KillTree(job); });
}

void JobRunner::KillTree(Job* job) {
  // mpirun leads its session; its ranks sit in process groups of their own within it.
  auto tree = JobTree(ListProcesses(), job->pid, job->pid);
  {
    std::lock_guard<std::mutex> lock(mu_);
    job->kill_snapshot = tree;
  }
  common::LogInfo("killing job",
                  {{"job", std::to_string(job->id)}, {"processes", std::to_string(tree.size())}});
  // The ranks get SIGTERM, mpirun does not: signalled, mpirun aborts the job and SIGKILLs the
  // ranks a second later (odls_base_sigkill_timeout), before a rank that is writing its
  // checkpoint (the engine's answer to SIGTERM) has finished. Left alone, it exits with them.
  std::vector<ProcessId> ranks;
  for (const ProcessId& p : tree) {
    if (p.pid != job->pid) ranks.push_back(p);
  }
  SignalAll(ranks.empty() ? tree : ranks, SIGTERM);
  std::unique_lock<std::mutex> lock(mu_);
  if (changed_.wait_for(lock, options_.jobs.kill_grace, [job] { return !job->running; })) return;
  lock.unlock();
  auto table = ListProcesses();
  auto all = JobTree(table, job->pid, job->pid);
  for (const auto& p : WithDescendants(table, tree)) {
    if (std::find(all.begin(), all.end(), p) == all.end()) all.push_back(p);
  }
  common::LogWarn("job survived SIGTERM; sending SIGKILL",
                  {{"job", std::to_string(job->id)}, {"processes", std::to_string(all.size())}});
  SignalAll(all, SIGKILL);
  // Processes that left the tree die when mpirun has exited (Wait): cgroup and uid sweep.
}

void JobRunner::KillAllAndWait(const std::string& reason) {
  std::vector<int64_t> running = Running();
  for (int64_t id : running) Kill(id, reason);
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [this] {
    for (const auto& [id, job] : jobs_) {
      if (job->running) return false;
    }
    return true;
  });
}

std::vector<int64_t> JobRunner::Running() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int64_t> out;
  for (const auto& [id, job] : jobs_) {
    if (job->running) out.push_back(id);
  }
  return out;
}

std::vector<api::LaunchAck> JobRunner::HeldLaunches() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<api::LaunchAck> out;
  for (const auto& [id, job] : jobs_) {
    if (job->from_launch) out.push_back({id, job->attempt});
  }
  return out;
}

std::vector<RunningJob> JobRunner::RunningJobs() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<RunningJob> out;
  for (const auto& [id, job] : jobs_) {
    if (job->running && job->pid != 0) out.push_back({id, job->tenant, job->pid});
  }
  return out;
}

std::vector<api::FinishedJob> JobRunner::Unreported() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<api::FinishedJob> out;
  for (const auto& [id, job] : jobs_) {
    if (job->running) continue;
    out.push_back(job->result);
    if (job->from_launch) out.back().attempt = job->attempt;
    // Put together for the heartbeat about to carry it: the last of the node's phases.
    MarkPhase(*job, &out.back().timings.reported_ms);
  }
  return out;
}

void JobRunner::Acknowledge(const std::vector<int64_t>& job_ids) {
  std::vector<std::unique_ptr<Job>> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int64_t id : job_ids) {
      auto it = jobs_.find(id);
      if (it == jobs_.end() || it->second->running) continue;
      if (it->second->from_launch) records_.Remove(id);
      done.push_back(std::move(it->second));
      jobs_.erase(it);
      recently_acknowledged_.push_back(id);
      if (recently_acknowledged_.size() > kRememberAcknowledged) recently_acknowledged_.pop_front();
    }
  }
  for (auto& job : done) JoinThreads(job.get());
}

std::optional<JobIdentity> JobRunner::Identity(int64_t job_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end() || !it->second->running || it->second->token.empty()) return std::nullopt;
  return JobIdentity{it->second->token, it->second->tenant};
}

pid_t JobRunner::LauncherPid(int64_t job_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? 0 : it->second->pid;
}

std::optional<api::FinishedJob> JobRunner::WaitFinished(int64_t job_id,
                                                        std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  bool done = changed_.wait_for(lock, timeout, [&] {
    auto it = jobs_.find(job_id);
    return it != jobs_.end() && !it->second->running;
  });
  if (!done) return std::nullopt;
  return jobs_.at(job_id)->result;
}

void JobRunner::MarkPhase(const Job& job, int64_t* phase) {
  if (!job.received) return;
  *phase = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 *job.received)
               .count();
}

void JobRunner::JoinThreads(Job* job) {
  if (job->preparer.joinable()) job->preparer.join();
  if (job->waiter.joinable()) job->waiter.join();
  if (job->killer.joinable()) job->killer.join();
}

}  // namespace agent
