#include "agent/sandbox/uid_scrub.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <utility>

#include "common/log.h"
#include "common/parse_int.h"

namespace agent {
namespace {

constexpr int kMaxDepth = 64;

// Directories never entered, by identity (device, inode): a path could be swapped, these cannot.
using KeepSet = std::set<std::pair<dev_t, ino_t>>;

void Warn(const std::string& what, const std::string& name, int err, ScrubReport* r) {
  ++r->errors;
  common::LogWarn("scrub of a finished job's files",
                  {{"what", what}, {"entry", name}, {"error", std::strerror(err)}});
}

using UidSet = std::set<uid_t>;

// Whether the directory open at `fd` (`st` its stat) is an agent's data directory: root's, with
// root's marker file in it (uid_scrub.h).
bool IsAgentData(int fd, const struct stat& st) {
  if (st.st_uid != 0) return false;
  struct stat marker;
  return ::fstatat(fd, kAgentDataMarker, &marker, AT_SYMLINK_NOFOLLOW) == 0 &&
         S_ISREG(marker.st_mode) && marker.st_uid == 0;
}

// Removes every entry one of `uids` owns below the directory open at `dir_fd` (on device `dev`).
// Every directory is walked, whoever owns it, since the uids' files may sit in anyone's
// world-writable directory; one a uid of the set owns is removed once emptied, or given to root
// when others' entries remain in it.
void ScrubDir(int dir_fd, dev_t dev, const UidSet& uids, const KeepSet& keep, int depth,
              ScrubReport* r) {
  if (depth > kMaxDepth) return;
  int list_fd = ::dup(dir_fd);
  DIR* d = list_fd < 0 ? nullptr : ::fdopendir(list_fd);
  if (d == nullptr) {
    if (list_fd >= 0) ::close(list_fd);
    return;
  }
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
      names.emplace_back(e->d_name);
    }
  }
  ::closedir(d);
  for (const auto& name : names) {
    struct stat st;
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (st.st_dev != dev) continue;  // another file system mounted here: not ours to walk
    if (S_ISDIR(st.st_mode)) {
      int sub = ::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub < 0) continue;
      struct stat opened;
      // The entry may have been swapped between fstatat and openat: walk what was opened.
      if (::fstat(sub, &opened) != 0 || opened.st_dev != dev ||
          keep.count({opened.st_dev, opened.st_ino}) || IsAgentData(sub, opened)) {
        ::close(sub);
        continue;
      }
      // A directory none of the uids can search holds nothing they wrote, nor anything below
      // it: not entered (a database's 0700 data directory is most of a busy /tmp). Group search
      // counts whatever the group, since a job holds its tenant's group too.
      if ((opened.st_mode & (S_IXOTH | S_IXGRP)) == 0 && uids.count(opened.st_uid) == 0) {
        ::close(sub);
        continue;
      }
      ScrubDir(sub, dev, uids, keep, depth + 1, r);
      if (uids.count(opened.st_uid)) {
        if (::unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) == 0) {
          ++r->removed;
        } else if (errno == ENOTEMPTY || errno == EEXIST) {
          if (::fchown(sub, 0, 0) == 0) {
            ++r->given_to_root;
          } else {
            Warn("chown", name, errno, r);
          }
        } else if (errno != ENOENT) {
          Warn("rmdir", name, errno, r);
        }
      }
      ::close(sub);
    } else if (uids.count(st.st_uid)) {
      if (::unlinkat(dir_fd, name.c_str(), 0) == 0) {
        ++r->removed;
      } else if (errno != ENOENT) {
        Warn("unlink", name, errno, r);
      }
    }
  }
}

// The System V objects of one kind (/proc/sysvipc/<kind>) that `uid` owns or created: their ids.
std::vector<int> SystemVIds(const std::string& kind, const UidSet& uids) {
  std::ifstream in("/proc/sysvipc/" + kind);
  std::string line;
  if (!std::getline(in, line)) return {};
  std::istringstream header(line);
  std::vector<std::string> columns;
  for (std::string c; header >> c;) columns.push_back(c);
  int id_col = -1, uid_col = -1, cuid_col = -1;
  for (int i = 0; i < static_cast<int>(columns.size()); ++i) {
    if (columns[i] == "shmid" || columns[i] == "msqid" || columns[i] == "semid") id_col = i;
    if (columns[i] == "uid") uid_col = i;
    if (columns[i] == "cuid") cuid_col = i;
  }
  std::vector<int> ids;
  if (id_col < 0 || uid_col < 0 || cuid_col < 0) return ids;
  while (std::getline(in, line)) {
    std::istringstream row(line);
    std::vector<std::string> f;
    for (std::string v; row >> v;) f.push_back(v);
    if (static_cast<int>(f.size()) <= std::max({id_col, uid_col, cuid_col})) continue;
    constexpr int64_t kMaxUid = std::numeric_limits<uid_t>::max();
    const auto id = common::ParseInt(f[id_col], 0, INT_MAX);
    const auto uid = common::ParseInt64(f[uid_col], 0, kMaxUid);
    const auto cuid = common::ParseInt64(f[cuid_col], 0, kMaxUid);
    if (!id.ok() || !uid.ok() || !cuid.ok()) continue;  // not a row of ids: nothing to remove
    if (uids.count(static_cast<uid_t>(*uid)) || uids.count(static_cast<uid_t>(*cuid))) {
      ids.push_back(*id);
    }
  }
  return ids;
}

void ScrubSystemV(const UidSet& uids, ScrubReport* r) {
  for (int id : SystemVIds("shm", uids)) {
    if (::shmctl(id, IPC_RMID, nullptr) == 0) {
      ++r->removed;
    } else if (errno != EINVAL && errno != EIDRM) {
      Warn("shmctl", "shm " + std::to_string(id), errno, r);
    }
  }
  for (int id : SystemVIds("msg", uids)) {
    if (::msgctl(id, IPC_RMID, nullptr) == 0) {
      ++r->removed;
    } else if (errno != EINVAL && errno != EIDRM) {
      Warn("msgctl", "msg " + std::to_string(id), errno, r);
    }
  }
  for (int id : SystemVIds("sem", uids)) {
    if (::semctl(id, 0, IPC_RMID) == 0) {
      ++r->removed;
    } else if (errno != EINVAL && errno != EIDRM) {
      Warn("semctl", "sem " + std::to_string(id), errno, r);
    }
  }
}

}  // namespace

std::vector<std::string> SharedScratchRoots() {
  std::vector<std::string> roots;
  for (const char* p : {"/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue"}) {
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) roots.emplace_back(p);
  }
  return roots;
}

ScrubReport ScrubUids(std::set<uid_t> uids, const std::vector<std::string>& roots, bool system_v,
                      const std::vector<std::string>& keep) {
  ScrubReport report;
  uids.erase(0);
  uids.erase(::geteuid());
  if (uids.empty()) return report;
  KeepSet kept;
  for (const auto& k : keep) {
    struct stat st;
    if (::stat(k.c_str(), &st) == 0) kept.insert({st.st_dev, st.st_ino});
  }
  for (const auto& root : roots) {
    int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st;
    if (::fstat(fd, &st) == 0) ScrubDir(fd, st.st_dev, uids, kept, 0, &report);
    ::close(fd);
  }
  if (system_v) ScrubSystemV(uids, &report);
  return report;
}

}  // namespace agent
