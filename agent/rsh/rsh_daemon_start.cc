// Starting a job's Open MPI daemon on this node for the head's `embody-agent rsh`
// (RshBridge::Start, rsh_bridge.h): the request checked against the job's assignment and token
// and parsed as the daemon's command; then the daemon set up as the head sets up mpirun (a uid
// and the tenant's group, GPUs of its own, a fresh job directory, a cgroup, its network),
// spawned in a session of its own, recorded for a restarted agent and watched. What follows its
// start is rsh_daemon.cc.
#include "agent/rsh/rsh_bridge.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "agent/launch/mpi_launch.h"
#include "agent/rsh/rsh_bridge_internal.h"
#include "agent/rsh/rsh_protocol.h"
#include "agent/sandbox/job_processes.h"
#include "agent/sandbox/process_tree.h"
#include "agent/sandbox/spawn.h"
#include "common/file_util.h"
#include "common/log.h"

namespace agent {

using rsh_bridge_internal::CheckJobToken;
using rsh_bridge_internal::NoPartHere;

namespace {

constexpr size_t kMaxBodyBytes = 2 * kMaxDaemonCommandBytes;

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

}  // namespace agent
