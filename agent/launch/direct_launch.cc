#include "agent/launch/direct_launch.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>

#include <CLI/CLI.hpp>

#include "agent/launch/rank_exec.h"

namespace agent {
namespace {

int LaunchRanksFail(const std::string& message) {
  std::fprintf(stderr, "embody-agent launch-ranks: %s\n", message.c_str());
  return 2;
}

// In the child, before anything else: its own process group, its output in its rank's files.
// Returns "" or why not.
std::string BecomeRank(const std::string& dir, int rank, int size) {
  if (::setpgid(0, 0) != 0) return std::string("setpgid: ") + std::strerror(errno);
  if (std::string why = RedirectRankOutput(dir, rank); !why.empty()) return why;
  for (const auto& [key, value] : DirectRankEnvironment(rank, size)) {
    ::setenv(key.c_str(), value.c_str(), 1);
  }
  return "";
}

int ExitCodeOf(int status) {
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> DirectRankEnvironment(int rank, int size) {
  const std::string r = std::to_string(rank), n = std::to_string(size);
  return {{"OMPI_COMM_WORLD_RANK", r},       {"OMPI_COMM_WORLD_SIZE", n},
          {"OMPI_COMM_WORLD_LOCAL_RANK", r}, {"OMPI_COMM_WORLD_LOCAL_SIZE", n},
          {"OMPI_COMM_WORLD_NODE_RANK", r},  {"OMPI_UNIVERSE_SIZE", n},
          {"PMIX_RANK", r}};
}

int LaunchRanksMain(const std::vector<std::string>& args) {
  int ranks = 0, grace_s = 5;
  std::string output, address_space, file;
  CLI::App app("embody-agent launch-ranks: start one node's ranks of a job without mpirun",
               "embody-agent launch-ranks");
  app.add_option("--ranks", ranks, "ranks to start")->required()->check(CLI::Range(1, 1 << 16));
  app.add_option("--output", output, "DIR/rank.R/{stdout,stderr}")->required();
  app.add_option("--grace-s", grace_s, "SIGTERM -> SIGKILL of the others after a rank failed")
      ->check(CLI::Range(0, 3600));
  app.add_option("--address-space", address_space, "RLIMIT_AS of each rank, in bytes");
  app.add_option("FILE", file, "the job's command.json")->required();
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 pops from the back
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return LaunchRanksFail(e.what());
  }
  if (output.empty() || output[0] != '/')
    return LaunchRanksFail("--output must be an absolute directory");
  std::vector<std::string> rank_args;
  if (!address_space.empty()) rank_args = {"--address-space", address_space};
  rank_args.push_back(file);

  std::map<pid_t, int> live;  // pid -> rank
  int code = 0;
  bool failed = false;
  auto fail_others = [&] {
    for (const auto& [pid, rank] : live) ::kill(-pid, SIGTERM);
  };
  for (int rank = 0; rank < ranks; ++rank) {
    pid_t pid = ::fork();
    if (pid < 0) {
      code = LaunchRanksFail(std::string("fork: ") + std::strerror(errno));
      failed = true;
      break;
    }
    if (pid == 0) {
      if (std::string err = BecomeRank(output, rank, ranks); !err.empty()) {
        std::fprintf(stderr, "embody-agent launch-ranks: rank %d: %s\n", rank, err.c_str());
        ::_exit(127);
      }
      ::_exit(RankExecMain(rank_args));  // returns only when the exec failed
    }
    ::setpgid(pid, pid);  // both sides, so a signal to the group never misses it
    live[pid] = rank;
  }
  if (failed) fail_others();
  auto deadline = std::chrono::steady_clock::time_point::max();
  if (failed) deadline = std::chrono::steady_clock::now() + std::chrono::seconds(grace_s);
  bool killed = false;
  while (!live.empty()) {
    int status = 0;
    // Blocking while every rank runs (no poll between a rank's exit and its report); polled
    // once the others were told to stop, so the grace can end.
    pid_t pid = ::waitpid(-1, &status, failed ? WNOHANG : 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;  // ECHILD: nothing left
    }
    if (pid == 0) {
      if (!killed && std::chrono::steady_clock::now() >= deadline) {
        for (const auto& [p, rank] : live) ::kill(-p, SIGKILL);
        killed = true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    if (live.erase(pid) == 0) continue;
    const int rank_code = ExitCodeOf(status);
    if (rank_code != 0 && !failed) {
      code = rank_code;
      failed = true;
      deadline = std::chrono::steady_clock::now() + std::chrono::seconds(grace_s);
      fail_others();
    }
  }
  return code;
}

}  // namespace agent
