#include "agent/sandbox/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <thread>

#include "agent/sandbox/cgroup_device_filter.h"
#include "common/file_util.h"
#include "common/log.h"

namespace agent {
namespace {

constexpr const char* kV2Controllers[] = {"memory", "cpu", "pids"};
constexpr int64_t kCpuPeriodUs = 100000;

common::Status WriteText(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return common::Internal("open " + path + ": " + std::strerror(errno));
  ssize_t n = ::write(fd, text.data(), text.size());
  int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size())) {
    return common::Internal("write \"" + text + "\" to " + path + ": " + std::strerror(err));
  }
  return common::Status::Ok();
}

std::string ReadText(const std::string& path) {
  auto r = common::ReadFile(path);
  return r.ok() ? *r : std::string();
}

bool Exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// mountinfo escapes blanks and backslashes as \ooo.
std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      int v = 0;
      bool ok = true;
      for (size_t k = 1; k <= 3; ++k) {
        char c = s[i + k];
        if (c < '0' || c > '7') ok = false;
        v = v * 8 + (c - '0');
      }
      if (ok) {
        out.push_back(static_cast<char>(v));
        i += 3;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

// Reads "key value" lines (memory.events, memory.oom_control) for `key`.
int64_t KeyedValue(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string k;
  int64_t v = 0;
  while (in >> k >> v) {
    if (k == key) return v;
  }
  return 0;
}

std::vector<pid_t> ReadPids(const std::string& procs_file) {
  std::vector<pid_t> out;
  std::istringstream in(ReadText(procs_file));
  pid_t p;
  while (in >> p) out.push_back(p);
  return out;
}

// Empties and removes a cgroup directory (and job-* children left by an earlier agent).
bool RemoveDir(const std::string& dir, bool v2, int wait_ms) {
  for (int waited = 0;; waited += 20) {
    if (v2 && Exists(dir + "/cgroup.kill")) {
      (void)WriteText(dir + "/cgroup.kill", "1");
    } else {
      for (pid_t p : ReadPids(dir + "/cgroup.procs")) ::kill(p, SIGKILL);
    }
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return true;
    if (errno != EBUSY || waited >= wait_ms) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void RemoveStaleJobs(const std::string& parent, bool v2) {
  DIR* d = ::opendir(parent.c_str());
  if (d == nullptr) return;
  std::vector<std::string> stale;
  while (dirent* e = ::readdir(d)) {
    if (std::strncmp(e->d_name, "job-", 4) == 0) stale.push_back(parent + "/" + e->d_name);
  }
  ::closedir(d);
  for (const auto& dir : stale) {
    common::LogWarn("removing a job cgroup left by an earlier agent", {{"cgroup", dir}});
    RemoveDir(dir, v2, 2000);
  }
}

common::Status MakeDir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return common::Internal("mkdir " + dir + ": " + std::strerror(errno));
  }
  return common::Status::Ok();
}

common::Status EnableV2Controllers(const std::string& dir) {
  return WriteText(dir + "/cgroup.subtree_control", "+memory +cpu +pids");
}

// v2 needs memory, cpu and pids offered to the agent's cgroup and passed on to its children.
bool SetUpV2(const std::string& own_dir, const std::string& tag, CgroupSetup* out) {
  std::string own = own_dir;
  const std::string kLeaf = "/embody-agent";
  if (own.size() > kLeaf.size() && own.compare(own.size() - kLeaf.size(), kLeaf.size(), kLeaf) == 0) {
    own.resize(own.size() - kLeaf.size());  // an earlier start of this agent moved itself there
  }
  std::istringstream avail(ReadText(own + "/cgroup.controllers"));
  std::set<std::string> have;
  for (std::string c; avail >> c;) have.insert(c);
  for (const char* c : kV2Controllers) {
    if (!have.count(c)) {
      out->note = std::string("cgroup v2 does not offer the ") + c + " controller to " + own;
      return false;
    }
  }
  common::Status st = EnableV2Controllers(own);
  if (!st.ok()) {
    // No internal processes: the agent leaves its cgroup for a leaf of its own.
    std::string leaf = own + kLeaf;
    if (MakeDir(leaf).ok() &&
        WriteText(leaf + "/cgroup.procs", std::to_string(::getpid())).ok()) {
      st = EnableV2Controllers(own);
    }
  }
  std::string parent = own + "/embody-" + tag;
  if (st.ok()) st = MakeDir(parent);
  if (st.ok()) st = EnableV2Controllers(parent);
  if (!st.ok()) {
    out->note = "cgroup v2 not usable: " + st.message();
    return false;
  }
  out->version = CgroupVersion::kV2;
  out->parents = {{"", parent}};
  return true;
}

bool SetUpV1(const std::map<std::string, std::string>& own, const std::string& tag,
             CgroupSetup* out) {
  auto mem = own.find("memory");
  if (mem == own.end()) {
    out->note += (out->note.empty() ? "" : "; ") + std::string("no v1 memory controller");
    return false;
  }
  std::map<std::string, std::string> parents;
  for (const char* c : {"memory", "cpu", "pids", "devices"}) {
    auto it = own.find(c);
    if (it == own.end()) continue;
    std::string parent = it->second + "/embody-" + tag;
    common::Status st = MakeDir(parent);
    if (!st.ok()) {
      if (std::string(c) == "memory") {
        out->note += (out->note.empty() ? "" : "; ") + st.message();
        return false;
      }
      common::LogWarn("cgroup v1 controller not usable", {{"controller", c}, {"error", st.message()}});
      continue;
    }
    parents[c] = parent;
  }
  out->version = CgroupVersion::kV1;
  out->parents = std::move(parents);
  return true;
}

}  // namespace

std::vector<std::string> GpuDenyRules(const std::vector<int>& minors) {
  std::vector<std::string> rules;
  for (int m : minors) {
    if (m >= 0 && m < 255) rules.push_back("c 195:" + std::to_string(m) + " rwm");
  }
  return rules;
}

const char* CgroupVersionName(CgroupVersion v) {
  switch (v) {
    case CgroupVersion::kV2: return "v2";
    case CgroupVersion::kV1: return "v1";
    default: return "none";
  }
}

std::vector<CgroupMount> ParseCgroupMounts(const std::string& mountinfo) {
  std::vector<CgroupMount> out;
  std::istringstream in(mountinfo);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::vector<std::string> fields;
    for (std::string w; f >> w;) fields.push_back(w);
    size_t dash = 0;
    while (dash < fields.size() && fields[dash] != "-") ++dash;
    if (dash < 6 || dash + 3 > fields.size()) continue;
    const std::string& fstype = fields[dash + 1];
    if (fstype != "cgroup" && fstype != "cgroup2") continue;
    CgroupMount m;
    m.root = Unescape(fields[3]);
    m.mount_point = Unescape(fields[4]);
    m.v2 = fstype == "cgroup2";
    if (!m.v2) {
      std::istringstream opts(fields[dash + 3]);
      for (std::string o; std::getline(opts, o, ',');) m.controllers.insert(o);
    }
    out.push_back(std::move(m));
  }
  return out;
}

std::map<std::string, std::string> ParseProcCgroup(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t a = line.find(':');
    size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    if (line.compare(0, a, "0") == 0 && controllers.empty()) {
      out[""] = path;
      continue;
    }
    std::istringstream list(controllers);
    for (std::string c; std::getline(list, c, ',');) out[c] = path;
  }
  return out;
}

std::map<std::string, std::string> OwnCgroupDirs(const std::vector<CgroupMount>& mounts,
                                                 const std::map<std::string, std::string>& self) {
  std::map<std::string, std::string> out;
  auto join = [](const CgroupMount& m, const std::string& path) -> std::string {
    std::string rel = path;
    if (m.root != "/") {
      if (rel.compare(0, m.root.size(), m.root) != 0) return "";
      rel = rel.substr(m.root.size());
    }
    while (!rel.empty() && rel.back() == '/') rel.pop_back();
    if (!rel.empty() && rel.front() != '/') rel = "/" + rel;
    return m.mount_point + rel;
  };
  for (const auto& m : mounts) {
    if (m.v2) {
      auto it = self.find("");
      if (it != self.end() && !out.count("")) {
        std::string dir = join(m, it->second);
        if (!dir.empty()) out[""] = dir;
      }
      continue;
    }
    for (const char* c : {"memory", "cpu", "pids", "devices"}) {
      auto it = self.find(c);
      if (!m.controllers.count(c) || it == self.end() || out.count(c)) continue;
      std::string dir = join(m, it->second);
      if (!dir.empty()) out[c] = dir;
    }
  }
  return out;
}

CgroupSetup SetUpCgroups(const std::string& tag) {
  CgroupSetup setup;
  auto mounts = ParseCgroupMounts(ReadText("/proc/self/mountinfo"));
  auto own = OwnCgroupDirs(mounts, ParseProcCgroup(ReadText("/proc/self/cgroup")));
  bool ok = false;
  if (own.count("")) ok = SetUpV2(own[""], tag, &setup);
  if (!ok) ok = SetUpV1(own, tag, &setup);
  if (!ok) {
    setup.version = CgroupVersion::kNone;
    setup.parents.clear();
    if (setup.note.empty()) setup.note = "no cgroup hierarchy mounted";
    return setup;
  }
  for (const auto& [controller, parent] : setup.parents) {
    RemoveStaleJobs(parent, setup.version == CgroupVersion::kV2);
  }
  return setup;
}

void TearDownCgroups(const CgroupSetup& setup) {
  for (const auto& [controller, parent] : setup.parents) ::rmdir(parent.c_str());
}

common::Result<std::unique_ptr<JobCgroup>> JobCgroup::Create(const CgroupSetup& setup,
                                                             int64_t job_id,
                                                             const CgroupLimits& limits) {
  if (setup.version == CgroupVersion::kNone) return common::FailedPrecondition("no cgroups");
  const bool v2 = setup.version == CgroupVersion::kV2;
  std::vector<std::string> dirs;
  std::string memory_dir;
  common::Status st;
  auto fail = [&](common::Status s) {
    for (const auto& d : dirs) RemoveDir(d, v2, 1000);
    return s;
  };
  for (const auto& [controller, parent] : setup.parents) {
    std::string dir = parent + "/job-" + std::to_string(job_id);
    if (Exists(dir) && !RemoveDir(dir, v2, 2000)) {
      return fail(common::Internal("cannot replace the leftover cgroup " + dir));
    }
    if (::mkdir(dir.c_str(), 0755) != 0) {
      return fail(common::Internal("mkdir " + dir + ": " + std::strerror(errno)));
    }
    dirs.push_back(dir);
    if (v2 || controller == "memory") memory_dir = dir;
    if (v2) {
      if (limits.memory_bytes > 0) {
        st = WriteText(dir + "/memory.max", std::to_string(limits.memory_bytes));
        if (st.ok() && Exists(dir + "/memory.swap.max")) {
          st = WriteText(dir + "/memory.swap.max", "0");
        }
      }
      if (st.ok() && limits.cpus > 0) {
        st = WriteText(dir + "/cpu.max",
                       std::to_string(limits.cpus * kCpuPeriodUs) + " " +
                           std::to_string(kCpuPeriodUs));
      }
      if (st.ok() && limits.max_pids > 0) {
        st = WriteText(dir + "/pids.max", std::to_string(limits.max_pids));
      }
      // v2 has no devices controller: the other jobs' GPUs are fenced by a device program,
      // attached before any process of the job can be inside.
      if (st.ok() && !limits.denied_gpus.empty()) {
        auto program = GpuDenyProgram(limits.denied_gpus);
        st = program.ok() ? AttachDeviceProgram(dir, *program) : program.status();
      }
    } else if (controller == "devices") {
      for (const std::string& rule : GpuDenyRules(limits.denied_gpus)) {
        if (st.ok()) st = WriteText(dir + "/devices.deny", rule);
      }
    } else if (controller == "memory" && limits.memory_bytes > 0) {
      st = WriteText(dir + "/memory.limit_in_bytes", std::to_string(limits.memory_bytes));
      // Swap counts too where the kernel accounts it (memsw must be set after the limit).
      if (st.ok() && Exists(dir + "/memory.memsw.limit_in_bytes")) {
        (void)WriteText(dir + "/memory.memsw.limit_in_bytes", std::to_string(limits.memory_bytes));
      }
    } else if (controller == "cpu" && limits.cpus > 0) {
      st = WriteText(dir + "/cpu.cfs_period_us", std::to_string(kCpuPeriodUs));
      if (st.ok()) {
        st = WriteText(dir + "/cpu.cfs_quota_us", std::to_string(limits.cpus * kCpuPeriodUs));
      }
    } else if (controller == "pids" && limits.max_pids > 0) {
      st = WriteText(dir + "/pids.max", std::to_string(limits.max_pids));
    }
    if (!st.ok()) return fail(st);
  }
  return std::unique_ptr<JobCgroup>(new JobCgroup(setup.version, std::move(dirs), memory_dir));
}

std::unique_ptr<JobCgroup> JobCgroup::Existing(CgroupVersion v, std::vector<std::string> dirs) {
  std::string memory_dir = dirs.empty() ? "" : dirs.front();
  return std::unique_ptr<JobCgroup>(new JobCgroup(v, std::move(dirs), std::move(memory_dir)));
}

std::vector<std::string> JobCgroup::ProcsFiles() const {
  std::vector<std::string> out;
  for (const auto& d : dirs_) out.push_back(d + "/cgroup.procs");
  return out;
}

std::vector<pid_t> JobCgroup::Pids() const {
  std::set<pid_t> all;
  for (const auto& d : dirs_) {
    for (pid_t p : ReadPids(d + "/cgroup.procs")) all.insert(p);
  }
  return {all.begin(), all.end()};
}

void JobCgroup::KillAll() const {
  for (const auto& d : dirs_) {
    if (version_ == CgroupVersion::kV2 && WriteText(d + "/cgroup.kill", "1").ok()) continue;
    for (pid_t p : ReadPids(d + "/cgroup.procs")) ::kill(p, SIGKILL);
  }
}

bool JobCgroup::MemoryLimitHit() const {
  if (memory_dir_.empty()) return false;
  if (version_ == CgroupVersion::kV2) {
    return KeyedValue(ReadText(memory_dir_ + "/memory.events"), "oom_kill") > 0;
  }
  return KeyedValue(ReadText(memory_dir_ + "/memory.oom_control"), "oom_kill") > 0;
}

common::Status JobCgroup::Remove(int wait_ms) {
  std::vector<std::string> left;
  for (const auto& d : dirs_) {
    if (!RemoveDir(d, version_ == CgroupVersion::kV2, wait_ms)) left.push_back(d);
  }
  dirs_ = left;
  if (!left.empty()) return common::Unavailable("cgroup " + left.front() + " did not empty");
  return common::Status::Ok();
}

}  // namespace agent
