#include "bench/agent_sim/proc_sampler.h"

#include <unistd.h>

#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace bench {

namespace {

std::string ReadProcText(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The fields of /proc/PID/stat after "pid (comm) ", which may itself hold spaces.
std::vector<std::string> StatFields(const std::string& stat_path) {
  const std::string text = ReadProcText(stat_path);
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos || paren + 2 > text.size()) return {};
  std::istringstream in(text.substr(paren + 2));
  return std::vector<std::string>((std::istream_iterator<std::string>(in)),
                                  std::istream_iterator<std::string>());
}

double CpuSeconds(const std::vector<std::string>& f) {
  // state is index 0; utime and stime are fields 14 and 15 of the line, 11 and 12 here.
  if (f.size() < 13) return 0;
  return (std::stod(f[11]) + std::stod(f[12])) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

int64_t StatusKb(const std::string& status, const std::string& key) {
  const size_t at = status.find("\n" + key + ":");
  if (at == std::string::npos) return 0;
  return std::strtoll(status.c_str() + at + key.size() + 2, nullptr, 10);
}

}  // namespace

ProcUsage ReadProcUsage(pid_t pid) {
  ProcUsage u;
  if (pid <= 0) return u;
  const std::string base = "/proc/" + std::to_string(pid);
  u.cpu_s = CpuSeconds(StatFields(base + "/stat"));
  const std::string status = "\n" + ReadProcText(base + "/status");
  u.peak_rss_bytes = StatusKb(status, "VmHWM") * 1024;
  u.rss_bytes = StatusKb(status, "VmRSS") * 1024;
  u.threads = static_cast<int>(StatusKb(status, "Threads"));
  return u;
}

PgUsage ReadPgUsage(pid_t postmaster) {
  PgUsage u;
  if (postmaster <= 0) return u;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    const auto f = StatFields(e.path().string() + "/stat");
    if (f.size() < 13) continue;
    const bool self = std::stoll(name) == postmaster;
    if (self || std::stoll(f[1]) == postmaster) {
      u.cpu_s += CpuSeconds(f);
      if (!self) ++u.backends;
    }
  }
  return u;
}

PeakSampler::PeakSampler(pid_t server, pid_t postmaster, double period_s)
    : server_(server), postmaster_(postmaster), period_s_(period_s) {
  thread_ = std::thread([this] { Run(); });
}

PeakSampler::~PeakSampler() {
  stop_ = true;
  thread_.join();
}

void PeakSampler::Run() {
  while (!stop_.load()) {
    const int threads = ReadProcUsage(server_).threads;
    if (threads > max_threads_.load()) max_threads_ = threads;
    const int backends = ReadPgUsage(postmaster_).backends;
    if (backends > max_backends_.load()) max_backends_ = backends;
    // Short sleeps so destruction does not wait a whole period.
    for (double slept = 0; slept < period_s_ && !stop_.load(); slept += 0.05) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

}  // namespace bench
