#include "agent/jobs/job_launcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "agent/data/dataset_import.h"
#include "agent/data/dataset_upload_fetch.h"
#include "agent/data/registry_pull.h"
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

std::string JoinInts(const std::vector<int>& v) {
  std::string out;
  for (int i : v) out += (out.empty() ? "" : ",") + std::to_string(i);
  return out;
}

}  // namespace

common::Result<JobLauncher::Planned> JobLauncher::Plan(HeldJob* job, const api::Command& launch) {
  const LocalResources res = ResourcesOf(launch.spec);
  // Ranks on this node's address run here; those of other hosts get their limits there.
  int local_ranks = 0;
  for (const auto& h : launch.hosts) {
    if (h.address == options_.jobs.address) local_ranks += std::max(0, h.ranks);
  }

  Planned out;
  LaunchInput& in = out.in;
  in = options_.jobs.LaunchInputFor(job->id);
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
  if (UploadOf(launch.spec)) {
    return common::FailedPrecondition("this agent cannot fetch dataset uploads");
  }
  if (IsRegistryPull(launch.spec)) return common::FailedPrecondition("this agent pulls no images");
  if (launch.spec.is_object() && launch.spec.value("kind", "") == "import") {
    auto paths = ImportPathsFor(options_.dataset_root, launch.tenant_id, launch.spec);
    if (!paths.ok()) return paths.status();
    // Said here, where the node knows why, rather than as exec-rank's exit 127.
    if (::access(options_.embody_data.c_str(), X_OK) != 0) {
      return common::FailedPrecondition(
          "this node cannot run imports: no embody-data at " + options_.embody_data +
          " (build it, or start embody-agent with --embody-data PATH)");
    }
    job->import = *paths;
    in.import_output = paths->output_dir;
    in.import_archive = !job->upload_fetched.empty();
  }
  if (job->image) {
    // Every rank runs in the image (agent/launch/container_config.h); the binds are added by the
    // plan.
    ContainerPlan container;
    container.rootfs = job->image->rootfs();
    container.image = job->image->config();
    container.init = options_.container_init;
    container.crun = options_.crun;
    in.container = container;
  }
  auto plan = BuildLaunchPlan(in);
  if (!plan.ok()) return plan.status();

  std::optional<JobCredentials>& creds = out.creds;
  if (options_.jobs.sandbox.switch_uid) {
    // The tenant's group opens its datasets and nothing else; a tenant without one never runs.
    auto group = TenantGid(options_.jobs.sandbox, launch.tenant_id);
    if (!group.ok()) return group.status();
    auto uid = uids_.Acquire(job->id);
    if (!uid.ok()) return uid.status();
    job->uid = *uid;
    creds = JobCredentials{*uid, static_cast<gid_t>(*uid), *group};
  }
  if (auto venv = PythonEnvironmentOf(launch.spec); venv.ok() && !venv->empty()) {
    // Said here, as the job's error, rather than as a rank's "python3: not found".
    if (auto st = CheckVirtualenvFor(creds, *venv); !st.ok()) return st;
  }
  if (options_.gpus && !options_.gpus->empty()) {
    // A cpu job sees no GPU; a gpu job sees the ones it was given, no other job's.
    auto taken =
        options_.gpus->Take(HeadGpuHolder(job->id), res.gpu ? local_ranks * res.slots_per_rank : 0);
    if (!taken.ok()) return taken.status();
    job->gpus = *taken;
    in.cuda_visible_devices = JoinInts(job->gpus);
  }
  CgroupLimits& limits = out.limits;
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
  if (!plan.ok()) return plan.status();
  out.plan = std::move(*plan);
  return out;
}

JobLauncher::Spawned JobLauncher::Spawn(HeldJob* job, const api::Command& launch, Planned planned) {
  LaunchInput& in = planned.in;
  LaunchPlan& plan = planned.plan;
  const std::optional<JobCredentials>& creds = planned.creds;
  const std::string id = std::to_string(job->id);
  const std::string log_dir = options_.jobs.LogDir(job->id);
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
      if (launch.resume_checkpoint.id != 0 && dir == options_.jobs.DownloadDir(job->id)) {
        note += " (checkpoint " + std::to_string(launch.resume_checkpoint.id) + " of job " +
                std::to_string(launch.resume_checkpoint.job_id) + ", fetched from the server)";
      }
      note += "\n";
      auto resumed = BuildLaunchPlan(in);
      if (!resumed.ok())
        return {0, 1, "cannot prepare job directory: " + resumed.status().message()};
      plan = std::move(*resumed);
    } else {
      note = "embody-agent: checkpoint " + file +
             " is not readable on this node; starting from step 0\n";
      common::LogWarn("checkpoint not readable here, starting from step 0",
                      {{"job", id}, {"checkpoint", file}});
    }
    // The launcher log is opened for appending by the spawn below, after this note.
    st = common::WriteFileAtomic(RankLogs::RankLogPath(log_dir, -1), note, 0640);
    if (!st.ok()) return {0, 1, "cannot prepare job directory: " + st.message()};
  }

  if (options_.jobs.cgroups.version != CgroupVersion::kNone) {
    auto cg = JobCgroup::Create(options_.jobs.cgroups, job->id, planned.limits);
    if (!cg.ok()) return {0, 1, "cannot create the job's cgroup: " + cg.status().message()};
    job->cgroup = std::move(*cg);
  }

  if (job->uid && options_.jobs.network) {
    // Before its first process: nothing of the job ever runs with the node's whole network.
    if (st = GrantJobNetwork(options_.jobs, *job->uid, {}, launch.hosts); !st.ok()) {
      return {0, 1, "cannot confine the job's network: " + st.message()};
    }
    job->network_granted = true;
  }
  logs_->AddJob(job->id, in.job_dir, log_dir, plan.total_ranks, job->uid, job->attempt,
                launch.log_bytes);
  SpawnRequest req;
  req.argv = plan.argv;
  req.env = EnvironmentStrings(plan.env);
  req.cwd = in.job_dir;
  req.output_path = RankLogs::RankLogPath(log_dir, -1);
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
    auto watcher = JobWatcher::Start(options_.jobs.rank_exec, log_dir + "/watcher.log", procs,
                                     options_.orphan_grace, options_.jobs.kill_grace);
    if (watcher.ok()) {
      job->watcher = std::move(*watcher);
    } else {
      // The job runs on; should this agent die, its restart still stops it (the record below).
      common::LogWarn("cannot start the job's watcher",
                      {{"job", id}, {"error", watcher.status().message()}});
    }
  }
  if (common::Status rec = SaveJobRecord(records_, *job); !rec.ok()) {
    common::LogWarn("cannot record the job's processes", {{"job", id}, {"error", rec.message()}});
  }
  return {*pid, 0, ""};
}

common::Status JobLauncher::PrepareDirs(HeldJob* job, const api::Command& launch,
                                        const LaunchPlan& plan,
                                        const std::optional<JobCredentials>& creds) {
  // A new attempt starts from an empty job directory: its logs restart at offset 0. The files the
  // agent writes there stay root's (readable); what the job writes is its own.
  const std::string job_dir = options_.jobs.JobDir(job->id);
  const std::string log_dir = options_.jobs.LogDir(job->id);
  EMBODY_RETURN_IF_ERROR(MakePrivateDir(job_dir, creds));
  EMBODY_RETURN_IF_ERROR(MakePrivateDir(job_dir + "/tmp", creds));
  EMBODY_RETURN_IF_ERROR(MakePrivateDir(plan.ranks_dir, creds));
  EMBODY_RETURN_IF_ERROR(WriteLaunchFile(job_dir + "/spec.json", launch.spec.dump(2) + "\n"));
  EMBODY_RETURN_IF_ERROR(WriteLaunchFile(plan.hostfile_path, plan.hostfile));
  EMBODY_RETURN_IF_ERROR(WriteLaunchFile(plan.command_path, plan.command));
  if (!plan.rsh_hosts.empty()) {
    EMBODY_RETURN_IF_ERROR(WriteLaunchFile(plan.rsh_hosts_path, plan.rsh_hosts));
  }
  EMBODY_RETURN_IF_ERROR(MakePrivateDir(log_dir, std::nullopt));
  // A new attempt on this node writes its logs afresh: what an earlier attempt wrote is on the
  // server, in that attempt's files; this attempt's start at offset 0 (api::LogChunk::attempt).
  {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(log_dir, ec)) {
      if (entry.is_regular_file(ec)) std::filesystem::remove(entry.path(), ec);
    }
  }
  if (job->import) EMBODY_RETURN_IF_ERROR(PrepareImport(*job->import, creds));
  const std::string checkpoints = options_.jobs.CheckpointDir(job->id);
  EMBODY_RETURN_IF_ERROR(common::MakeDirs(checkpoints));
  if (creds) return AdoptTree(checkpoints, *creds, uids_);
  return common::Status::Ok();
}

void JobLauncher::Release(HeldJob* job) {
  // Its rules go before its uid can be another job's.
  if (job->uid && job->network_granted) RevokeJobNetwork(options_.jobs, *job->uid);
  job->network_granted = false;
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

}  // namespace agent
