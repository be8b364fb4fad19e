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

// What the agent writes into command.json as "container".
struct ContainerPlan {
  std::string rootfs;  // the image's unpacked root file system (agent/images/image_cache.h)
  std::string init;    // embody-container-init on the host, bound at the same path
  std::string crun = "crun";
  std::vector<ContainerBind> binds;
};

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
