// What a finished job leaves behind outside its own directories, removed before its uid is
// handed to another job (the idea of systemd-logind's RemoveIPC=yes, applied per job).
//
// A job may write to the node's shared scratch places: /tmp, /var/tmp, /dev/shm (POSIX shared
// memory), /dev/mqueue (POSIX message queues), and create System V IPC objects. Job uids are reused
// (agent/sandbox/sandbox.h: one uid per running job, from a pool), so whatever the job left there
// would be readable by the next job given the same uid. When a job has ended and every process of
// its uid is gone, the agent removes each such entry the uid owns and each System V object whose
// owner or creator is the uid.
//
// The walk opens every directory relative to its parent's descriptor with O_NOFOLLOW and never
// crosses into another file system, so links planted by jobs still running (in world-writable
// directories) cannot redirect it. Directories the uid could not search (no search bit for others or
// group, another owner) are not entered: nothing in them or below is the uid's doing. A directory the uid owns that still holds other uids' entries
// after the scrub is given to root (mode kept), so the next holder of the uid cannot use it.
#pragma once

#include <sys/types.h>

#include <set>
#include <string>
#include <vector>

namespace agent {

// The file that marks an agent's data directory (PrepareDataDir writes it).
inline constexpr char kAgentDataMarker[] = ".embody-agent-data";

// The node's shared scratch places, those of them that exist.
std::vector<std::string> SharedScratchRoots();

struct ScrubReport {
  int removed = 0;        // files, links, directories and IPC objects removed
  int given_to_root = 0;  // directories kept because others' entries remain inside
  int errors = 0;         // entries that could not be removed (logged)
};

// Removes what the `uids` own under `roots` (the roots themselves are never removed) and, with
// `system_v`, the System V shared memory segments, message queues and semaphore sets they own or
// created, in one walk (what a finished job costs is the walk, so uids released together are
// scrubbed together). Directories in `keep` (the agent's data directory, which may sit under
// /tmp and holds the jobs' checkpoints, owned by their uids) are never entered. Leaves uid 0 and
// the agent's own uid alone. Nor is any directory owned by root that holds a regular file
// kAgentDataMarker owned by root: another agent's data directory on the same machine (two agents
// of one machine, as in a local cluster, may hand out the same job uid; without it one agent's
// scrub gave the other's fresh job directory, the uid's and holding root's launch files, to
// root). A job cannot make either: it owns neither a root directory nor a root file. Meant for
// uids with no live process.
ScrubReport ScrubUids(std::set<uid_t> uids, const std::vector<std::string>& roots, bool system_v,
                      const std::vector<std::string>& keep = {});

}  // namespace agent
