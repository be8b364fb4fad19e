// The agent <-> server protocol: what an agent sends when it registers and on every heartbeat,
// and the commands the server answers with. Heartbeats are short and frequent (one request per
// interval), so a thousand agents cost a thousand short requests per interval. An idle heartbeat
// may ask to be held until the server has a command for the node (wait_ms); the server holds
// only a few at once and answers the rest at once, so held heartbeats never park every thread.
//
//   POST /v1/agents/register          RegisterRequest  -> RegisterResponse
//   POST /v1/agents/{node_id}/heartbeat  HeartbeatRequest -> HeartbeatResponse
//
// Register takes the cluster join token or the node's own credential; heartbeats take the node's
// credential only, and act only for the node it was issued to (a mismatch is 403).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace api {

struct GpuInfo {
  int index = 0;
  std::string name;
  int64_t memory_bytes = 0;
};

// How this node keeps jobs apart from the agent and from each other (agent/sandbox/sandbox.h).
struct NodeIsolation {
  bool unprivileged_uid = false;  // jobs run as a uid of their own, not the agent's
  std::string cgroup = "none";    // "v2", "v1" or "none": where CPU and memory limits are enforced
  bool rlimits = false;           // per-rank rlimits (address space, processes, core files)
};

struct RegisterRequest {
  std::string name;       // node name, unique in the cluster; re-registering keeps the node id
  std::string address;    // IP or host name other nodes reach this node at
  std::string agent_url;  // base URL of the agent's own HTTP endpoint
  int cpu_slots = 0;
  int64_t memory_bytes = 0;
  std::vector<GpuInfo> gpus;
  NodeIsolation isolation;
};

// An agent registers with the cluster's join token (first start, or a node the server holds
// DOWN) or with its own node credential (a restart). The server answers with the node's id and,
// when it issued one, a new node credential: the agent keeps it (0600 in its data directory) and
// uses it for every later call. A node credential acts for its node only; a join token can only
// register.
struct RegisterResponse {
  int64_t node_id = 0;
  int heartbeat_interval_ms = 1000;
  std::string node_token;  // empty: keep the credential used for this registration
};

// Where one launch's time went on its head node: milliseconds from the agent's receipt of the
// launch command, read on the agent's monotonic clock. Only durations cross from node to server,
// never wall times, so the phases need no agreement between the two clocks. -1: not reached (a
// job refused before it started has no process_started_ms) or not known (older agents send none).
// Reached phases never decrease in this order.
struct LaunchTimings {
  int64_t sandbox_prepared_ms = -1;  // uid, directories, launch files and cgroup ready
  int64_t process_started_ms = -1;   // the launcher (mpirun, or the direct launcher) exec'd
  int64_t exited_ms = -1;            // the launcher exited: every rank had
  int64_t slot_freed_ms = -1;        // leftovers killed, logs collected, uid/GPUs/cgroup given back
  int64_t reported_ms = -1;          // the heartbeat carrying the end was put together
  bool Empty() const;
  bool operator==(const LaunchTimings&) const = default;
};
// The most any of them may be (about 3 years); a larger value or an out-of-order set is dropped
// at parse, whole, never failing the heartbeat that carried it.
inline constexpr int64_t kMaxLaunchTimingMs = int64_t{100'000'000'000};

// A job that ended on this node, reported once by its head agent (repeated until acknowledged by
// a successful heartbeat reply).
struct FinishedJob {
  int64_t job_id = 0;
  int exit_code = 0;     // process exit code; 128+N when killed by signal N
  std::string reason;    // human-readable, e.g. "exited with code 3", "killed on cancel"
  // Whether the agent had signalled the job (a kill command) before it exited. A job that ended
  // on its own while a kill was on its way finished its work; one that was signalled stopped.
  // Absent on the wire (older agents): true.
  bool killed = true;
  // The job did not end: the node lost it (its agent restarted while it ran and stopped what was
  // left). The server restarts it as after a node loss. Absent on the wire: false.
  bool lost = false;
  // The attempt that ended. The server takes the report only for the job's current attempt, so
  // the end of a stale attempt (one a node ran while cut off, after the job was requeued and
  // placed on the same node again) never ends the new one. Absent on the wire (older agents, -1
  // here): the current attempt.
  int attempt = -1;
  // Where the launch's time went on this node (absent on the wire: all -1).
  LaunchTimings timings;
};

// An event a job posted to its agent (step metrics, checkpoint written, ...). `data` is the
// object the job posted, without further interpretation by the agent.
struct JobEventReport {
  int64_t job_id = 0;
  int64_t time_ms = 0;
  std::string type;  // "step", "checkpoint", or any type a user program posts
  nlohmann::json data;
};

// New bytes of one rank's log. rank -1 is the launcher's own output (mpirun).
struct LogChunk {
  int64_t job_id = 0;
  int rank = 0;
  int64_t offset = 0;  // byte offset of `data` in the rank's log
  std::string data;
  // The attempt of the job whose log this is: each attempt's log starts at offset 0. Absent on
  // the wire (older agents, -1 here): the job's current attempt.
  int attempt = -1;
};

// A launch the agent holds: it accepted the launch command of this attempt of the job and has not
// yet had its end acknowledged. Listed in every heartbeat, so the server knows the launch arrived
// (a launch reply lost to a timeout is sent again until it is acknowledged).
struct LaunchAck {
  int64_t job_id = 0;
  int attempt = 0;
  bool operator==(const LaunchAck&) const = default;
};

struct HeartbeatRequest {
  std::vector<int64_t> running;  // jobs whose processes are alive on this node
  // Every launch the agent holds (running, preparing, or ended and not yet acknowledged). Absent
  // on the wire (older agents): the server takes `running` and `finished` as the acknowledgement.
  std::vector<LaunchAck> launched;
  bool has_launched = false;  // whether the agent sent `launched` at all
  // The worker assignments (Command::kWorker) the agent holds in full, by job and attempt: the
  // server answers those with the short form (Command::held). Absent on the wire (older agents,
  // has_workers false): every worker command goes in full.
  std::vector<LaunchAck> workers;
  bool has_workers = false;
  std::vector<FinishedJob> finished;
  std::vector<JobEventReport> events;
  std::vector<LogChunk> logs;
  // How long the server may hold this heartbeat when it has no command for the node, answering
  // as soon as one exists (a job placed there): launches then go out at once instead of at the
  // next beat. 0 (absent on the wire): answer at once. The server holds at most its heartbeat
  // interval, only a bounded number at a time, and never one that carries events or logs but
  // no finished jobs (an agent may abandon a held call; what it abandons must be safe to
  // resend). One that carries finished jobs (which the agent never abandons) is held at most
  // until the scheduling pass the freed slots woke is over (a job placed there comes back in
  // its reply), and never longer than 200 ms.
  int wait_ms = 0;
};

// The most a heartbeat may ask to be held (HeartbeatRequest::wait_ms).
inline constexpr int kMaxHeartbeatWaitMs = 60'000;

struct HostSlot {
  int64_t node_id = 0;
  std::string name;
  std::string address;
  int ranks = 0;  // ranks of this job on that node
  // The node's agent (RegisterRequest::agent_url): where the head's `embody-agent rsh` asks for
  // Open MPI's daemon on that node (docs/multinode.md). Empty from an older server.
  std::string agent_url;
};

// A checkpoint in the server's blob store (GET /v1/jobs/{job_id}/checkpoints/{id}/data).
struct CheckpointRef {
  int64_t id = 0;  // 0: none
  int64_t job_id = 0;
  int64_t step = 0;
  int64_t bytes = 0;
  std::string sha256;
};

// A launch command is repeated in every heartbeat reply until the head agent acknowledges it
// (HeartbeatRequest::launched); the agent treats a launch of an attempt it already holds, or has
// already run, as a no-op.
//
// A worker command tells a node other than the head that it holds part of a scheduled or running
// job: it is in every reply while the job is SCHEDULED or RUNNING, and the agent takes the worker
// commands of each reply as the whole set of its assignments (one that is gone has ended there).
// It carries what the node needs to start Open MPI's daemon for the job when the head asks
// (docs/multinode.md): the job, attempt, tenant, spec, log_bytes, the SHA-256 of the job token,
// and in `hosts` this node's own entry (its ranks of the job). Once the agent lists the
// assignment in HeartbeatRequest::workers, the server sends it short (`held`: the job and attempt
// only), so a reply costs no reads of the job's spec and logs however long the job runs.
struct Command {
  enum class Type { kLaunch, kKill, kWorker };
  Type type = Type::kLaunch;
  int64_t job_id = 0;
  // kLaunch only:
  int64_t tenant_id = 0;
  std::string tenant;
  int attempt = 0;
  nlohmann::json spec;          // the job's JobSpec as ToJson wrote it
  std::vector<HostSlot> hosts;  // first entry is the head node
  // The job's latest checkpoint when it has one (a restart after node loss): the engine resumes
  // from it. Empty for a first start.
  std::string resume_from;
  // The checkpoint to start from through the blob store: the job's latest ready upload after a
  // restart, or the spec's init_from on a first start. The head agent downloads it before
  // launching (unless resume_from is readable there and no older), so a job restarted on another
  // node resumes without a shared file system. id 0: none.
  CheckpointRef resume_checkpoint;
  // Older servers: bytes of each rank's log the server held from earlier attempts, which this
  // attempt's bytes followed. Servers now keep each attempt's logs apart (LogChunk::attempt) and
  // send none; still parsed, so an agent of either age meets a server of either age.
  std::map<int, int64_t> log_bytes;
  // kLaunch: the job's token for this attempt (EMBODY_JOB_TOKEN of its ranks, and the credential
  // of its daemons on the other nodes); empty from an older server: the agent makes one.
  std::string job_token;
  // kWorker: hex SHA-256 of the attempt's job token, which a daemon request must present.
  std::string job_token_sha256;
  // kWorker: the address of every node of the job's allocation, this one's included: what the
  // job's processes on this node may reach (agent/sandbox/job_network.h). Empty from an older
  // server: they reach this node only.
  std::vector<std::string> peers;
  // kWorker: the short form, job_id and attempt only, for an assignment the agent said it holds
  // (HeartbeatRequest::workers): keep it as it is. An agent that does not hold that attempt in
  // full ignores it, does not list it, and gets it in full in the next reply.
  bool held = false;
};

struct HeartbeatResponse {
  std::vector<Command> commands;
  // Jobs whose end this heartbeat reported and the server did not take yet: the agent keeps them
  // and reports them again. The server holds the failure of a job on several nodes until each
  // other node of it has been heard since, so that a node lost under the job (whose loss the
  // head's launcher saw first) restarts it as a node loss rather than failing it. Absent on the
  // wire (older servers): every end reported was taken.
  std::vector<int64_t> deferred;
};

nlohmann::json ToJson(const RegisterRequest& r);
nlohmann::json ToJson(const RegisterResponse& r);
nlohmann::json ToJson(const HeartbeatRequest& r);
nlohmann::json ToJson(const HeartbeatResponse& r);
common::Result<RegisterRequest> ParseRegisterRequest(const nlohmann::json& j);
common::Result<RegisterResponse> ParseRegisterResponse(const nlohmann::json& j);
common::Result<HeartbeatRequest> ParseHeartbeatRequest(const nlohmann::json& j);
common::Result<HeartbeatResponse> ParseHeartbeatResponse(const nlohmann::json& j);

}  // namespace api
