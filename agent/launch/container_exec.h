// How exec-rank (agent/launch/rank_exec.h) runs a rank of an image job: it writes the rank's OCI
// bundle (config.json from agent/launch/container_config.h, with the rank's whole environment)
// under the job directory and execs `crun run` in place, as the job's uid, so mpirun, the direct
// launcher and the agent's signals see the rank's own process; crun passes SIGTERM and the other
// signals it gets to the container's init, which passes them to the command.
//
// crun runs rootless: it makes the user namespace itself, mapping the job's uid to itself. Before
// the exec this process enters a user and mount namespace of its own and covers /sys/fs/cgroup
// with an empty tmpfs, in that private view only: crun refuses a "hybrid" cgroup layout (v1
// controllers plus a cgroup2 mount at /sys/fs/cgroup/unified with any controller enabled) even
// with its cgroup manager disabled, and our nodes mount exactly that; it refuses as well a
// /sys/fs/cgroup that holds no cgroup file system (an agent run under `ip netns exec`, which
// mounts a fresh sysfs without it), covered the same way. The view changes nothing else: the
// container's processes stay in the rank's cgroups, limits included.
#pragma once

#include <string>
#include <vector>

#include "agent/launch/container_config.h"

namespace agent {

// Returns only on failure, with why.
std::string ExecInContainer(const ContainerPlan& plan, const std::vector<std::string>& argv);

}  // namespace agent
