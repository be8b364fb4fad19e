#include "agent/sandbox/job_processes.h"

#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "agent/sandbox/sandbox.h"

namespace agent {
namespace {

std::vector<pid_t> CgroupPids(const std::vector<std::string>& dirs) {
  std::vector<pid_t> out;
  for (const auto& d : dirs) {
    std::ifstream in(d + "/cgroup.procs");
    for (pid_t p; in >> p;) out.push_back(p);
  }
  return out;
}

// Real, effective or saved uid of `pid` is `uid` (/proc/PID/status).
bool RunsAs(pid_t pid, uid_t uid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Uid:", 0) != 0) continue;
    std::istringstream fields(line.substr(4));
    for (int i = 0; i < 3; ++i) {
      long long u = -1;
      if (fields >> u && static_cast<uid_t>(u) == uid) return true;
    }
    return false;
  }
  return false;
}

bool SafeCgroupDir(const std::string& d) {
  return d.rfind("/sys/fs/cgroup/", 0) == 0 && d.find("/..") == std::string::npos &&
         d.find('\n') == std::string::npos;
}

}  // namespace

nlohmann::json ToJson(const JobProcesses& p) {
  nlohmann::json j = {{"job_id", p.job_id},
                      {"launcher_pid", p.launcher.pid},
                      {"launcher_start", p.launcher.start_time},
                      {"cgroup_version", CgroupVersionName(p.cgroup_version)},
                      {"cgroup_dirs", p.cgroup_dirs}};
  if (p.uid) j["uid"] = *p.uid;
  return j;
}

common::Result<JobProcesses> ParseJobProcesses(const nlohmann::json& j) {
  if (!j.is_object()) return common::InvalidArgument("job processes: not an object");
  JobProcesses p;
  try {
    p.job_id = j.at("job_id").get<int64_t>();
    p.launcher.pid = j.at("launcher_pid").get<pid_t>();
    p.launcher.start_time = j.at("launcher_start").get<uint64_t>();
    const std::string v = j.at("cgroup_version").get<std::string>();
    if (v == "v1") {
      p.cgroup_version = CgroupVersion::kV1;
    } else if (v == "v2") {
      p.cgroup_version = CgroupVersion::kV2;
    } else if (v != "none") {
      return common::InvalidArgument("job processes: unknown cgroup version " + v);
    }
    p.cgroup_dirs = j.at("cgroup_dirs").get<std::vector<std::string>>();
    if (j.contains("uid")) p.uid = j.at("uid").get<uid_t>();
  } catch (const nlohmann::json::exception& e) {
    return common::InvalidArgument(std::string("job processes: ") + e.what());
  }
  if (p.job_id <= 0 || p.launcher.pid < 0) return common::InvalidArgument("job processes: bad ids");
  if (p.uid && *p.uid == 0) return common::InvalidArgument("job processes: uid 0");
  for (const auto& d : p.cgroup_dirs) {
    if (!SafeCgroupDir(d)) return common::InvalidArgument("job processes: bad cgroup " + d);
  }
  return p;
}

std::vector<ProcessId> FindJobProcesses(const JobProcesses& p) {
  const auto table = ListProcesses();
  const pid_t self = ::getpid();
  std::set<pid_t> seen{self};
  std::vector<ProcessId> out;
  auto add = [&](const ProcessEntry& e) {
    if (e.state != 'Z' && seen.insert(e.id.pid).second) out.push_back(e.id);
  };
  if (p.launcher.pid > 0) {
    bool same = false;
    for (const auto& e : table) same = same || e.id == p.launcher;
    if (same) {
      for (const auto& id : JobTree(table, p.launcher.pid, p.launcher.pid)) {
        if (seen.insert(id.pid).second) out.push_back(id);
      }
    }
  }
  std::set<pid_t> in_cgroup;
  for (pid_t pid : CgroupPids(p.cgroup_dirs)) in_cgroup.insert(pid);
  // A job's cgroup holds every process it made, escapees too (a job cannot leave it), so the
  // uid is searched only where there is none: a uid is the job's alone only among the jobs of
  // one agent, and agents sharing a host (tests, several agents per machine) may reuse one.
  const bool by_uid = p.uid.has_value() && p.cgroup_dirs.empty();
  for (const auto& e : table) {
    if (in_cgroup.count(e.id.pid) || (by_uid && RunsAs(e.id.pid, *p.uid))) add(e);
  }
  return out;
}

int StopJobProcesses(const JobProcesses& p, std::chrono::milliseconds term_grace) {
  auto found = FindJobProcesses(p);
  const int first = static_cast<int>(found.size());
  if (!found.empty()) {
    SignalAll(found, SIGTERM);
    auto end = std::chrono::steady_clock::now() + term_grace;
    while (std::chrono::steady_clock::now() < end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (FindJobProcesses(p).empty()) break;
    }
  }
  // Rounds, since a process can fork between the scan and the signal.
  for (int round = 0; round < 50; ++round) {
    auto left = FindJobProcesses(p);
    if (left.empty()) break;
    SignalAll(left, SIGKILL);
    if (p.uid && p.cgroup_dirs.empty()) KillAllOfUid(*p.uid);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!p.cgroup_dirs.empty()) {
    (void)JobCgroup::Existing(p.cgroup_version, p.cgroup_dirs)->Remove(2000);
  }
  return first;
}

}  // namespace agent
