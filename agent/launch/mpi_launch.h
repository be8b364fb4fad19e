// How a job becomes an `mpirun` command line: the hostfile, the argv and the whole environment.
//
// This is the one place that knows Open MPI's launcher options and environment variables
// (Open MPI 5 renames the run-as-root variables to PRTE_MCA_*; change them here only). It is a
// pure function of its inputs so every variant is unit-tested without starting anything; the
// JobRunner does the fork/exec.
//
// Open MPI 4.1 facts this relies on (checked with 4.1.4):
//  - `--output-filename DIR:nojobid,nocopy` writes DIR/rank.N/stdout and DIR/rank.N/stderr and
//    does not echo rank output on mpirun's own stdout (without `nojobid` the files are under
//    DIR/1/rank.N/; without `nocopy` every line is duplicated into mpirun's output).
//  - mpirun exits with the exit code of the first rank that exited non-zero, and with 128+N when
//    a rank was killed by signal N, so its own exit status is the job's exit code.
//  - `--` ends mpirun's options (the next word is the program even when it starts with '-'), but
//    a ":" anywhere after the program still starts another application context with options of
//    its own (`prog : -np 64 --host x other`). So a job's argv never reaches mpirun's command
//    line: the agent writes it to <job>/command.json and every rank runs
//    `embody-agent exec-rank [--address-space N] <job>/command.json`
//    (agent/launch/rank_exec.h), which execs it. mpirun sees only words the agent wrote.
//  - Ranks on other hosts (docs/multinode.md): mpirun's rsh launcher runs
//    `embody-agent rsh --hosts <job>/rsh-hosts.json [--ca-file CA] HOST orted ...`
//    (agent/rsh/rsh_protocol.h), which asks that host's agent to start Open MPI's daemon there. The
//    agent string is split on whitespace, so the binary, job and CA paths must hold none. The
//    daemons are launched by mpirun itself (plm_rsh_no_tree_spawn): a daemon never launches
//    another.
//  - Each node has its own data directory, so a multi-node exec-rank reads `command.json`
//    relative to its working directory: on the head that is mpirun's, the job directory; on
//    another node the head's directory is not the rank's to enter and Open MPI falls back to
//    HOME, which that node's agent set to its own job directory.
//  - As a uid with no /etc/passwd entry mpirun needs only a writable TMPDIR (its session
//    directory, ompi.<host>.<uid>, and PMIx's rendezvous files go there) and a HOME; the
//    run-as-root variables are set only when the job's processes really are root.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/launch/container_config.h"
#include "api/agent_protocol.h"
#include "common/status.h"

namespace agent {

struct LaunchInput {
  int64_t job_id = 0;
  nlohmann::json spec;               // the JobSpec JSON from the launch command
  std::vector<api::HostSlot> hosts;  // first is the head (this node); others need agent_url
  std::string local_address;         // this agent's --address
  std::string job_dir;               // <data-dir>/jobs/job-<id>: cwd, HOME, TMPDIR of the job
  std::string checkpoint_dir;        // <data-dir>/checkpoints/job-<id>
  std::string mpirun = "mpirun";
  std::string engine;     // embody-engine path, for engine kinds
  std::string embody_data;  // embody-data path, for kind import
  std::string import_output;  // kind import: the directory embody-data creates (must not exist)
  // kind import of a LeRobot upload: the source path is a tar of the dataset directory, which
  // embody-data unpacks beside import_output (--tar) and removes after.
  bool import_archive = false;
  std::string rank_exec;  // what every rank runs as `exec-rank` (JobSandboxOptions::rank_exec)
  std::string rsh_exec;   // what mpirun runs as `rsh` on multi-node jobs; "": rank_exec
  std::string agent_url;  // http://127.0.0.1:PORT, or https:// when the agent serves TLS
  // The CAs agents' certificates chain to (EMBODY_CA_FILE of the ranks, --ca-file of the rsh
  // launcher); "": the system's, and neither is set.
  std::string ca_file;
  std::string job_token;
  std::string resume_from;  // checkpoint to resume from; empty: start at step 0
  // The directory holding the Python SDK's package `embody` (PYTHONPATH of the ranks); "": none.
  std::string python_sdk;
  // A command job's torch.distributed rendezvous on the head node (MASTER_ADDR, MASTER_PORT of
  // every rank, forwarded to the other nodes); 0: none.
  int master_port = 0;
  // libembody-rendezvous-wait.so, which a default-launcher command job's ranks other than 0
  // preload (agent/launch/rendezvous_wait.h), named in command.json; "": none.
  std::string rendezvous_wait;
  std::string path = "/usr/local/bin:/usr/bin:/bin";  // PATH of the job
  int64_t address_space_bytes = 0;  // RLIMIT_AS of each rank; 0: none
  // CUDA_VISIBLE_DEVICES on a node with GPUs ("" hides them all); unset on a node without.
  std::optional<std::string> cuda_visible_devices;
  // Operator's Open MPI settings (OMPI_MCA_*, PMIX_MCA_* from the agent's environment).
  std::vector<std::pair<std::string, std::string>> mpi_settings;
  bool as_root = false;  // the job's processes run as root (Open MPI must be told it may)
  // An image job's container (command.json's "container"; agent/launch/container_config.h): every
  // rank runs its command inside it. nullopt: on the node's own files. Its binds are the launch's
  // own paths, added by BuildLaunchPlan: the job and checkpoint directories (read-write), the SDK,
  // the directory of resume_from, each bound dataset and the CA file (read-only).
  std::optional<ContainerPlan> container;
  int kill_grace_s = 5;  // seconds a killed job's ranks get to end on their own
};

struct LaunchPlan {
  std::string hostfile_path;
  std::string hostfile;           // contents
  std::string rsh_hosts_path;     // multi-node only: address -> agent URL of the other hosts
  std::string rsh_hosts;          // its contents (JSON); empty for a job on this node alone
  std::string ranks_dir;          // --output-filename target
  std::string command_path;       // <job>/command.json, read by exec-rank
  std::string command;            // its contents: {"argv": [...]}
  std::vector<std::string> argv;  // argv[0] is the mpirun path
  // mpirun's complete environment: nothing else of the agent's reaches the job.
  std::vector<std::pair<std::string, std::string>> env;
  // Processes mpirun starts, each with a rank log: the job's ranks, or its nodes under torchrun
  // (a node's torchrun and its workers write one log).
  int total_ranks = 0;
};

// invalid_argument for a launch the agent cannot run (no hosts, a head that is not this node, a
// host without an agent URL, an empty command, ...).
common::Result<LaunchPlan> BuildLaunchPlan(const LaunchInput& in);

// Open MPI's daemon for a job whose head is another node, as this node runs it: the command file
// its ranks' exec-rank reads and the daemon's argv and complete environment. `in` describes this
// node (job_dir, checkpoint_dir, engine, path, ...; hosts, mpirun and job_token are not used);
// `daemon` is this node's daemon binary and `daemon_args` its arguments (DaemonArgsForNode).
struct DaemonPlan {
  std::string command_path;
  std::string command;
  std::string ranks_dir;
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env;
};
common::Result<DaemonPlan> BuildDaemonPlan(const LaunchInput& in, const std::string& daemon,
                                           const std::vector<std::string>& daemon_args);

// A command job's virtualenv ("environment": {"python": DIR} of its spec, checked again as the
// server checks it), "" when it names none. Its bin/ comes first on the ranks' PATH and
// VIRTUAL_ENV is DIR in both plans above; whether the job's uid can run DIR/bin/python3 is the
// caller's check (it knows the uid).
common::Result<std::string> PythonEnvironmentOf(const nlohmann::json& spec);

// A command job's image as the server bound it (launch spec "environment": {"image": {"name":
// "NAME@VERSION", "path": the version's layout directory, "digest": "sha256:<hex>" of its
// manifest}}); nullopt for a job without one, invalid_argument for a malformed one.
struct ImageRef {
  std::string name;
  std::string path;
  std::string digest;
};
common::Result<std::optional<ImageRef>> ImageOf(const nlohmann::json& spec);

// The daemon binary named `program` ("orted", "prted") of the Open MPI whose mpirun is `mpirun`:
// beside it when mpirun is a path, else looked up in the job's PATH.
std::string DaemonBinary(const std::string& mpirun, const std::string& program);

// KEY=VALUE strings for execve.
std::vector<std::string> EnvironmentStrings(
    const std::vector<std::pair<std::string, std::string>>& env);

// The OMPI_MCA_* and PMIX_MCA_* entries of `environ` (KEY=VALUE strings).
std::vector<std::pair<std::string, std::string>> OpenMpiSettings(
    const std::vector<std::string>& environ);

}  // namespace agent
