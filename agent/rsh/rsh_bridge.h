// The receiving end of the rsh bridge (docs/multinode.md): on a node that holds part of a job whose
// head is another node, starts Open MPI's daemon for that job when the head's `embody-agent rsh`
// asks (POST /v1/local/jobs/{id}/rsh, agent/local_api/local_api.h), streams its output and exit
// back, and ends it when the stream or the job ends.
//
// What the node knows of such jobs comes from the server: every heartbeat reply lists the
// node's worker assignments (api::Command::kWorker: job, attempt, tenant, spec, the SHA-256 of
// the attempt's job token), and SetAssignments takes each list as the whole set. A request is
// accepted only for an assigned job, with that job token, for Open MPI's daemon with arguments
// (agent/rsh/rsh_protocol.h), one daemon per job at a time and at most `max_daemons` at once.
//
// The daemon runs in the job's sandbox on this node, as the head's mpirun does there
// (agent/sandbox/sandbox.h): a uid of its own from the agent's UidPool with the tenant's group,
// no_new_privs, rlimits, a cgroup where the node has them, a clean environment, and a job
// directory of its own (<data-dir>/jobs/job-<id>, with the command file its ranks' exec-rank
// reads). Its ranks' output files are folded and shipped by this node's RankLogs as the head
// does for its ranks; the daemon's own output goes to <data-dir>/daemons/job-<id>.out (root's)
// and back through the stream into the head's launcher log. When the daemon exits everything
// left of it (its session, cgroup and uid) is SIGKILLed, and the job directory goes back to
// root. Thread-safe.
//
// A job in an OCI image (docs/byo.md "Environments") runs its ranks here inside the image too:
// a full assignment whose spec binds an image starts unpacking it into the node's ImageCache at
// once, on a thread of its own, and holds it while the assignment lasts. The head's agent asks
// ImageReady (GET /v1/local/jobs/{id}/image) until every node has it, and starts mpirun only
// then; a daemon request before that is refused (unavailable), and one after a failed
// preparation says why (failed_precondition).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/sandbox/cgroup.h"
#include "agent/node/gpu_pool.h"
#include "agent/images/image_cache.h"
#include "agent/jobs/job_record.h"
#include "agent/jobs/job_sandbox_options.h"
#include "agent/jobs/job_watcher.h"
#include "agent/jobs/rank_logs.h"
#include "agent/sandbox/sandbox.h"
#include "api/agent_protocol.h"
#include "common/status.h"

namespace agent {

struct RshBridgeOptions {
  // What the daemons share with this node's own job launches (agent/jobs/job_sandbox_options.h);
  // the daemon binary is the one beside jobs.mpirun (DaemonBinary).
  JobSandboxOptions jobs;
  // Streams held at once; each holds one of the local API's threads (agent/local_api/local_api.h).
  int max_daemons = 8;
  // How long a daemon and its ranks outlive this agent process before their watcher stops them
  // (agent/jobs/job_watcher.h), as for the jobs this node heads; no watcher when jobs.rank_exec
  // (the agent binary) is empty.
  std::chrono::milliseconds orphan_grace{3000};
  // The node's GPUs, shared with the jobs it heads (agent/node/gpu_pool.h): a gpu job's daemon
  // takes its ranks' GPUs here, and its cgroup is denied the others. Null: a node without GPUs.
  std::shared_ptr<GpuPool> gpus;
  // Where image jobs' images are unpacked (shared with the node's JobRunner; must outlive the
  // bridge); null: such jobs' parts fail here, saying so. container_init: embody-container-init,
  // PID 1 of their containers; crun: the runtime.
  ImageCache* images = nullptr;
  std::string container_init;
  std::string crun = "crun";
};

// One started daemon, shared by the stream that reads it and the bridge that may end it.
class RemoteDaemon {
 public:
  struct Update {
    std::string output;           // bytes since the last call
    std::optional<int> exit_code;  // set once the daemon and all it left are gone
  };
  ~RemoteDaemon();
  // New output, or the end, or nothing after `wait`.
  Update Next(std::chrono::milliseconds wait);
  // SIGTERM to the daemon's tree, SIGKILL after the grace period. Idempotent.
  void Stop(const std::string& why);
  int64_t job_id() const { return job_id_; }

 private:
  friend class RshBridge;
  RemoteDaemon(int64_t job_id, std::chrono::milliseconds grace) : job_id_(job_id), grace_(grace) {}
  void Kill();  // on the killer thread

  const int64_t job_id_;
  const std::chrono::milliseconds grace_;
  pid_t pid_ = 0;
  int output_fd_ = -1;  // read end of <data-dir>/daemons/job-<id>.out
  std::mutex mu_;
  std::condition_variable changed_;
  bool stopping_ = false;
  std::optional<int> exit_code_;
  std::thread waiter_;
  std::thread killer_;
};

class RshBridge {
 public:
  // `uids` is the one the node's JobRunner uses (a uid is never given to two jobs); `uids` and
  // `logs` must outlive the bridge.
  RshBridge(RshBridgeOptions options, UidPool* uids, RankLogs* logs);
  ~RshBridge();  // ends every daemon and waits for them
  RshBridge(const RshBridge&) = delete;
  RshBridge& operator=(const RshBridge&) = delete;

  // The worker commands of one heartbeat reply, the whole set: daemons of jobs no longer
  // listed (ended, or a new attempt) are stopped. A short (`held`) command keeps the assignment
  // of that attempt as it is; one this bridge does not hold in full is dropped.
  void SetAssignments(const std::vector<api::Command>& workers);
  // The assignments held in full, by job and attempt (api::HeartbeatRequest::workers).
  std::vector<api::LaunchAck> HeldAssignments() const;
  // A kill command: the job's daemon here is stopped and the assignment forgotten.
  void Kill(int64_t job_id);

  // Whether the job's image is ready on this node, for the head's agent (authorized as Start):
  // true when it is unpacked and held, or the job has none; false while it is being prepared;
  // failed_precondition, saying why, when it cannot be; not_found / unauthenticated as Start.
  common::Result<bool> ImageReady(int64_t job_id, const std::string& authorization) const;

  // A daemon request. `authorization` is the raw header value; `body` is {"argv": [words...]}.
  // not_found: no such job assigned here; unauthenticated: not the job's token; invalid_argument:
  // not the daemon; already_exists: the job's daemon runs; resource_exhausted: too many streams;
  // unavailable: the job's image is still being prepared; failed_precondition: it cannot be.
  common::Result<std::shared_ptr<RemoteDaemon>> Start(int64_t job_id,
                                                      const std::string& authorization,
                                                      const std::string& body);

  // At the agent's start, before it serves: stops whatever daemons an earlier agent process on
  // this data directory left running (its records, <data-dir>/daemons/running), their watchers
  // first. Those jobs' heads lost their streams; what is left of them here is only in the way.
  // Returns how many records were found.
  int StopLeftovers();

  std::vector<int64_t> Running() const;  // jobs whose daemon runs here
  std::string JobDir(int64_t job_id) const;
  std::string LogDir(int64_t job_id) const;

 private:
  // One assignment's image, prepared by a thread of its own; fields under the bridge's mu_.
  struct ImagePrep {
    std::string name;  // NAME@VERSION, for messages
    bool done = false;
    common::Status status;  // when done: why it cannot be used
    std::unique_ptr<ImageUse> use;  // when done and ok: held until the assignment ends
  };
  struct Assignment {
    api::Command worker;
    std::shared_ptr<RemoteDaemon> daemon;  // null: none started (or it ended)
    std::shared_ptr<ImagePrep> image;      // null: the job runs on the node's own files
  };
  struct Started {
    std::optional<uid_t> uid;
    std::unique_ptr<JobCgroup> cgroup;
    std::unique_ptr<JobWatcher> watcher;  // null: none (no agent binary, or it failed to start)
    bool gpus = false;  // holds GPUs of options_.gpus (DaemonGpuHolder)
    bool network = false;  // uid has its network rules (JobSandboxOptions::network)
  };
  // Waits for the daemon, then sweeps what it left and releases its uid, GPUs and cgroup.
  void Reap(std::shared_ptr<RemoteDaemon> daemon, Started started);
  // mu_ held. Starts preparing the image `worker`'s spec binds, if any (a malformed binding is a
  // preparation that failed); null when it binds none.
  std::shared_ptr<ImagePrep> StartImagePrep(const api::Command& worker);

  const RshBridgeOptions options_;
  const JobRecords records_;  // the daemons running, for a restarted agent (StopLeftovers)
  UidPool* const uids_;
  RankLogs* const logs_;
  mutable std::mutex mu_;
  std::map<int64_t, Assignment> assignments_;
  std::vector<std::shared_ptr<RemoteDaemon>> all_;  // every daemon started, to join at the end
  int live_ = 0;
  // The threads of image preparations, each with a flag set (under mu_) as its last act; those
  // done are joined at the next one's start, the rest when the bridge ends (an unpack is not
  // interrupted). Only the assignment holds the preparation once its thread ended, so the image
  // goes with the assignment.
  struct Preparer {
    std::shared_ptr<bool> done;
    std::thread thread;
  };
  std::vector<Preparer> preparers_;
};

}  // namespace agent
