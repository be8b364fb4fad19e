#include "agent/sandbox/process_tree.h"

#include <dirent.h>
#include <signal.h>

#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "common/parse_int.h"

namespace agent {
namespace {

// Parses /proc/PID/stat. The command name may contain spaces and ')' so parsing starts after
// the last ')'.
bool ReadStat(pid_t pid, ProcessEntry* out) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  if (!in) return false;
  std::string line;
  std::getline(in, line);
  size_t close = line.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream rest(line.substr(close + 1));
  // Fields after comm: 3 state, 4 ppid, 5 pgrp, 6 session, ..., 14 utime, 15 stime,
  // 16 cutime, 17 cstime, ..., 22 starttime, 23 vsize, 24 rss.
  std::string state;
  long ppid = 0, pgrp = 0, session = 0;
  rest >> state >> ppid >> pgrp >> session;
  std::string skip;
  for (int field = 7; field <= 13; ++field) rest >> skip;
  long long utime = 0, stime = 0, cutime = 0, cstime = 0;
  rest >> utime >> stime >> cutime >> cstime;
  for (int field = 18; field <= 21; ++field) rest >> skip;
  uint64_t start = 0, vsize = 0;
  long long rss = 0;
  rest >> start >> vsize >> rss;
  if (!rest || state.empty()) return false;
  auto ticks = [](long long v) { return v > 0 ? static_cast<uint64_t>(v) : 0; };
  out->utime = ticks(utime);
  out->stime = ticks(stime);
  out->cutime = ticks(cutime);
  out->cstime = ticks(cstime);
  out->rss_pages = ticks(rss);
  out->id = {pid, start};
  out->ppid = static_cast<pid_t>(ppid);
  out->pgid = static_cast<pid_t>(pgrp);
  out->sid = static_cast<pid_t>(session);
  out->state = state[0];
  return true;
}

}  // namespace

ProcessId ProcessIdOf(pid_t pid) {
  ProcessEntry e;
  return ReadStat(pid, &e) ? e.id : ProcessId{};
}

std::vector<ProcessEntry> ListProcesses() {
  std::vector<ProcessEntry> out;
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return out;
  while (dirent* e = ::readdir(dir)) {
    const auto pid = common::ParseInt64(e->d_name, 1, std::numeric_limits<pid_t>::max());
    if (!pid.ok()) continue;  // not a process directory
    ProcessEntry p;
    if (ReadStat(static_cast<pid_t>(*pid), &p)) out.push_back(p);
  }
  ::closedir(dir);
  return out;
}

std::vector<ProcessId> JobTree(const std::vector<ProcessEntry>& table, pid_t sid, pid_t root) {
  std::multimap<pid_t, const ProcessEntry*> children;
  for (const auto& p : table) children.emplace(p.ppid, &p);
  std::set<pid_t> picked;
  std::vector<ProcessId> out;
  auto add = [&](const ProcessEntry& p) {
    if (p.state == 'Z' || !picked.insert(p.id.pid).second) return;
    out.push_back(p.id);
  };
  if (sid > 0) {
    for (const auto& p : table) {
      if (p.sid == sid) add(p);
    }
  }
  if (root > 0) {
    std::vector<pid_t> frontier{root};
    std::set<pid_t> seen{root};
    while (!frontier.empty()) {
      pid_t parent = frontier.back();
      frontier.pop_back();
      auto [lo, hi] = children.equal_range(parent);
      for (auto it = lo; it != hi; ++it) {
        if (!seen.insert(it->second->id.pid).second) continue;
        add(*it->second);
        frontier.push_back(it->second->id.pid);
      }
    }
  }
  return out;
}

bool IsAlive(const ProcessId& id) {
  ProcessEntry now;
  return ReadStat(id.pid, &now) && now.id == id && now.state != 'Z';
}

int SignalAll(const std::vector<ProcessId>& ids, int sig) {
  int n = 0;
  for (const auto& id : ids) {
    // The start-time check and kill are not atomic; the window is microseconds against a pid
    // space that wraps after tens of thousands of forks.
    if (IsAlive(id) && ::kill(id.pid, sig) == 0) ++n;
  }
  return n;
}

}  // namespace agent
