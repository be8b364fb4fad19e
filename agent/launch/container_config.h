// The OCI runtime config (config.json) one rank of an image job runs under, and the "container"
// block of the job's command file that exec-rank builds it from (docs/byo.md "Environments").
//
// The container is as thin as the platform's guarantees allow: the host's network namespace
// (peers, MASTER_ADDR and the agent's job-local API on loopback stay reachable; nothing more is
// opened), its own mount, pid, ipc and uts namespaces, and a user namespace that maps the job's
// uid and gid to themselves only, so the processes are the job's uid inside and out and hold no
// capability on the host. No capabilities, no_new_privs, the image's root file system read-only,
// the job's own directories and its bound datasets bind-mounted at the paths the agent gives them
// on the host (so EMBODY_* paths mean the same inside), /tmp and /dev/shm private tmpfs, and the
// host's /etc/hosts and /etc/resolv.conf. crun runs without a cgroup manager: the container's
// processes stay in the rank's cgroup, whose limits the agent set.
//
// PID 1 of the container is embody-container-init (agent/launch/container_init_main.cc), which
// forwards SIGTERM and the other stop signals to the job's command and reaps: a process that is PID
// 1 of its namespace ignores signals it has no handler for, so without it SIGTERM would do nothing
// and cancel or preemption would wait out the grace period for SIGKILL.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace agent {

struct ContainerBind {
  std::string path;  // absolute, the same on the host and in the container
  bool read_only = true;
  bool is_file = false;  // a file (its mount point is an empty file, not a directory)
};

// What of the image's own configuration (the "config" of its OCI config blob) a rank runs with:
// its Env and its WorkingDir. Its Entrypoint and Cmd are not used: a job's "command" replaces
// both, as a Kubernetes container's "command" does.
struct ImageRunConfig {
  std::vector<std::string> env;  // KEY=VALUE, in the image's order
  std::string working_dir;       // absolute, or "" (none set)
};

// The image config blob's Env and WorkingDir, checked: at most 1,024 variables of at most
// 32 KiB each, every one KEY=VALUE with a KEY of letters, digits and '_' not starting with a digit
// (no NUL anywhere), a WorkingDir absolute without "..". invalid_argument names what is wrong.
// A blob without "config", or a config without either, is an image that sets none.
common::Result<ImageRunConfig> ParseImageRunConfig(const nlohmann::json& config_blob);
nlohmann::json ToJson(const ImageRunConfig& config);
common::Result<ImageRunConfig> ParseImageRunConfigJson(const nlohmann::json& j);

// A rank's environment inside its image: the image's Env, with the rank's own variables over it
// (the platform's: rank, rendezvous, job, SDK), except that the image's PATH and LD_LIBRARY_PATH
// win (the host's directories mean nothing inside the image) and PYTHONPATH is the rank's (the
// SDK) followed by the image's. Order: the image's variables first, then the rank's others.
std::vector<std::string> MergeImageEnvironment(const std::vector<std::string>& image_env,
                                               const std::vector<std::string>& rank_env);

// What the agent writes into command.json as "container".
struct ContainerPlan {
  std::string rootfs;  // the image's unpacked root file system (agent/images/image_cache.h)
  std::string init;    // embody-container-init on the host, bound at the same path
  std::string crun = "crun";
  std::vector<ContainerBind> binds;
  ImageRunConfig image;  // the image's Env and WorkingDir
};

// Where a rank starts inside the container: the image's WorkingDir when it sets one; else the
// directory it was started in (`cwd`) when one of the binds holds it; else `home`.
std::string ContainerWorkingDir(const ContainerPlan& plan, const std::string& cwd,
                                const std::string& home);

nlohmann::json ToJson(const ContainerPlan& plan);
// invalid_argument for anything but absolute paths without "..", and a crun without a name.
common::Result<ContainerPlan> ParseContainerPlan(const nlohmann::json& j);

// Everything config.json needs for one rank.
struct ContainerProcess {
  std::vector<std::string> args;  // the job's command (init is put in front of it)
  std::vector<std::string> env;   // KEY=VALUE, the rank's whole environment
  std::string cwd;                // absolute, inside one of the binds
  uid_t uid = 0;
  gid_t gid = 0;
  std::string hostname;  // the node's, so the rank's name is the same inside
};

// The OCI runtime spec (1.0.2) for `plan` and `process`.
nlohmann::json OciRuntimeConfig(const ContainerPlan& plan, const ContainerProcess& process);

}  // namespace agent
