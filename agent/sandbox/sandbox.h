// The sandbox a job runs in on its node, and the node's probe of which parts of it it has.
//
// A job is tenant code. On a node whose agent runs as root, each running job gets a uid of its own
// (and the same gid) from a configured range, never shared with another running job and never one
// that still has processes; mpirun and every rank run as that uid with exactly one supplementary
// group, its tenant's (TenantGid: the same number on every node), and no_new_privs
// (agent/sandbox/spawn.h does the switch and checks it held). So a job cannot read another job's
// files or /proc/<pid>/environ (where job tokens live), cannot signal or ptrace it, and cannot read
// the agent's files: the data directory is
//
//   <data-dir>/              0711 root   (job uids may pass through, not list)
//     node.token             0600 root
//     jobs/                  0711 root
//       job-<id>/            0700 job uid: the job's cwd, HOME, TMPDIR, Open MPI output
//     checkpoints/           0711 root
//       job-<id>/            0700 job uid while the job runs
//     logs/                  0700 root: the rank logs the agent folds and ships
//
// and every ancestor of <data-dir> must be searchable by others. When a job ends its two
// directories go back to root (0700), so the next job given the same uid finds nothing.
//
// The tenant's group opens one thing only: the tenant's directory under the dataset root,
// root:<tenant gid> 0750 (agent/data/dataset_import.h), so a job reads its own tenant's datasets
// and no other's, and cannot write there. Nothing else the agent makes is group-owned by a tenant,
// and what a job writes gets its own gid, not the tenant's. A tenant id past the configured range
// has no group: its jobs are refused at launch.
//
// Limits come on top (rlimits on every process, agent/sandbox/cgroup.h where the node has cgroups).
// An agent that is not root cannot switch uid: it runs jobs as itself and reports
// unprivileged_uid false at registration, as does one started with --run-jobs-as-agent; such a
// node isolates nothing, tenant groups included.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <chrono>
#include <condition_variable>
#include <vector>

#include "agent/sandbox/cgroup.h"
#include "agent/sandbox/spawn.h"
#include "api/agent_protocol.h"
#include "common/status.h"

namespace agent {

struct SandboxOptions {
  bool switch_uid = true;  // off: jobs run as the agent (always so when the agent is not root)
  uid_t uid_base = 200000;
  int uid_count = 65536;             // job uids are uid_base .. uid_base + uid_count - 1
  // Tenant t's group is tenant_gid_base + t, for 0 < t < tenant_gid_count: the same on every node
  // sharing a dataset root, and never in the job uid (= gid) range.
  gid_t tenant_gid_base = 10000000;
  int tenant_gid_count = 65536;
  int64_t max_processes = 4096;      // RLIMIT_NPROC of the job's uid, pids.max of its cgroup
  int64_t max_open_files = 65536;    // RLIMIT_NOFILE of every process
  std::string path = "/usr/local/bin:/usr/bin:/bin";  // PATH of the job
};

// The rlimits every process of a job gets at spawn: no core files, bounded descriptors and, with
// the uid switch (RLIMIT_NPROC counts every process of the real uid), bounded processes. The
// address-space limit is per rank (agent/launch/rank_exec.h), not here.
std::vector<ResourceLimit> JobRlimits(const SandboxOptions& options);

// The supplementary group of every process of a job of `tenant_id`, which opens that tenant's
// directory under the dataset root (agent/data/dataset_import.h). invalid_argument for a tenant id
// below 1; failed_precondition, saying which flag to raise, for one past tenant_gid_count.
common::Result<gid_t> TenantGid(const SandboxOptions& options, int64_t tenant_id);

// Hands out job uids: job_id mod uid_count first, then the next ones, skipping uids held by a
// running job of this agent and uids that own live processes (another agent's jobs on the same
// machine, leftovers). Thread-safe.
class UidPool {
 public:
  explicit UidPool(const SandboxOptions& options);
  ~UidPool();  // scrubs what is still queued, then stops the scrubber
  UidPool(const UidPool&) = delete;
  UidPool& operator=(const UidPool&) = delete;

  common::Result<uid_t> Acquire(int64_t job_id);
  // Gives `uid` back once nothing of it runs. After ScrubBeforeReuse, the uid stays out of the pool
  // until what it owns in the shared scratch places is removed (agent/sandbox/uid_scrub.h), which a
  // thread of the pool does in the background: a job's end is reported without waiting for the walk
  // of /tmp, and no job gets the uid before the walk is done. Uids released together are scrubbed
  // in one walk; the thread exists only while there is something to scrub.
  void Release(uid_t uid);
  // Scrubs released uids under `roots`, never entering `keep`, before they are handed out again.
  // A second call adds its roots and kept directories to the first's.
  void ScrubBeforeReuse(const std::vector<std::string>& roots,
                        const std::vector<std::string>& keep);
  // Waits until every uid released so far is scrubbed and back in the pool.
  void WaitScrubbed();
  // Whether `uid` is in the configured range (files it owns were written by some job).
  bool InRange(uid_t uid) const;

 private:
  void ScrubLoop();

  const uid_t base_;
  const int count_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::set<uid_t> held_;       // running, or released and waiting for the scrub
  std::set<uid_t> to_scrub_;   // released, not yet walked
  int scrubbing_ = 0;          // uids in the walk under way
  bool stop_ = false;
  bool scrub_enabled_ = false;     // ScrubBeforeReuse was called
  bool scrubber_running_ = false;  // scrubber_ runs ScrubLoop and has not returned
  std::chrono::steady_clock::time_point next_walk_{};
  std::vector<std::string> scrub_roots_;
  std::vector<std::string> scrub_keep_;
  std::thread scrubber_;       // runs while released uids wait for their walk
};

// Creates the layout above (modes included; owner root when `switch_uid`) and, with
// `switch_uid`, checks that every ancestor of `data_dir` is searchable by others.
common::Status PrepareDataDir(const std::string& data_dir, bool switch_uid);

// A fresh directory owned by `owner` with mode 0700 (removed first with all it held).
common::Status MakePrivateDir(const std::string& path, const std::optional<JobCredentials>& owner);

// One of an attempt's launch files (spec, hostfile, command) in the job directory
// MakePrivateDir just made, before any process of the job runs: created exclusively and never
// through a link (whatever is there already is refused), owned by the agent, and not fsynced.
// They are the attempt's alone and remade by the next; should the node crash, the job is
// stopped and reported lost (agent/jobs/job_record.h), never restarted from them. Six fsyncs a
// launch (file and directory, three files) were on every job's critical path.
common::Status WriteLaunchFile(const std::string& path, const std::string& contents,
                               int mode = 0644);

// Gives a job's existing directory tree to `owner` again (its next attempt may have another uid):
// the top directory always, entries below only when a job uid (per `pool`) owns them and, for
// files, only with a single link, so a link planted by a job never hands it someone else's file.
// Symbolic links are never followed.
common::Status AdoptTree(const std::string& path, const JobCredentials& owner,
                         const UidPool& pool);

// A finished job's directory back to root, mode 0700, and with `pool`, everything in it that job
// uids own (as AdoptTree, so no link is followed): nothing in the agent's data directory stays
// owned by a uid that another job will be given, and nothing there is what
// agent/sandbox/uid_scrub.h removes. No-op for a missing path.
void LockDir(const std::string& path, const UidPool* pool = nullptr);

// Whether `creds` may read `path` (access(2) in a child that switched to them); `dir` adds
// X_OK, for a directory to look into.
bool CanReadAs(const JobCredentials& creds, const std::string& path, bool dir);

// Whether `creds` may read and execute `path` (a program the job will run); without
// credentials (jobs run as the agent's uid), the agent's own access(2).
bool CanExecuteAs(const std::optional<JobCredentials>& creds, const std::string& path);

// A command job's virtualenv `venv` (environment.python) as the job's uid finds it: an error
// naming <venv>/bin/python3 unless that is a file the uid can read and execute.
common::Status CheckVirtualenvFor(const std::optional<JobCredentials>& creds,
                                  const std::string& venv);

// SIGKILLs every process whose real or saved uid is `uid` (kill(-1) from a child running as it),
// which catches processes that left the job's tree. Returns once the signal is sent.
void KillAllOfUid(uid_t uid);

// Uids of live (not zombie) processes in /proc.
std::set<uid_t> ProcessUids();

// Whether this process can switch to `creds` (root, and the uid exists in its user namespace).
bool CanSwitchTo(const JobCredentials& creds);

// What the node reports at registration (api::RegisterRequest::isolation).
api::NodeIsolation DescribeIsolation(bool switch_uid, CgroupVersion cgroups);

}  // namespace agent
