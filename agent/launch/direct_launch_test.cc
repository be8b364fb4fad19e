// The direct launcher (agent/launch/direct_launch.h) as the agent runs it: `embody-agent
// launch-ranks` forks every rank with Open MPI's and torch's variables, its output in its rank's
// files, and exits as mpirun does; a failed rank stops the others, SIGKILL after the grace.
#include "agent/launch/direct_launch.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace agent {
namespace {

class DirectLaunchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("direct_launch_test." + std::to_string(::getpid()) + "." +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ / "ranks");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Runs `launch-ranks` over `argv` with `ranks` ranks; its exit code (128+N: killed by N).
  int Launch(const std::vector<std::string>& argv, int ranks, int grace_s = 5) {
    const std::string file = (dir_ / "command.json").string();
    std::ofstream(file) << nlohmann::json({{"argv", argv}}).dump();
    std::vector<std::string> args = {EMBODY_AGENT_BINARY, "launch-ranks", "--ranks",
                                     std::to_string(ranks), "--output", (dir_ / "ranks").string(),
                                     "--grace-s", std::to_string(grace_s), file};
    pid_t pid = ::fork();
    if (pid == 0) {
      std::vector<char*> c;
      for (auto& a : args) c.push_back(a.data());
      c.push_back(nullptr);
      ::setsid();
      ::execv(c[0], c.data());
      ::_exit(126);
    }
    launcher_ = pid;
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  }

  std::string Out(int rank, const char* stream = "stdout") {
    std::ifstream in(dir_ / "ranks" / ("rank." + std::to_string(rank)) / stream);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  std::filesystem::path dir_;
  std::atomic<pid_t> launcher_{0};
};

TEST_F(DirectLaunchTest, EveryRankGetsOpenMpisAndTorchsVariablesAndItsOwnLog) {
  const std::string print =
      "echo $OMPI_COMM_WORLD_RANK $OMPI_COMM_WORLD_SIZE $OMPI_COMM_WORLD_LOCAL_RANK "
      "$OMPI_COMM_WORLD_LOCAL_SIZE $OMPI_COMM_WORLD_NODE_RANK $OMPI_UNIVERSE_SIZE $PMIX_RANK "
      "$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $NODE_RANK; echo err >&2; "
      "test $(ps -o pgid= -p $$) -eq $$";  // a process group of its own
  ASSERT_EQ(Launch({"sh", "-c", print}, 3), 0);
  for (int r = 0; r < 3; ++r) {
    const std::string R = std::to_string(r);
    EXPECT_EQ(Out(r), R + " 3 " + R + " 3 " + R + " 3 " + R + " " + R + " 3 " + R + " 3 0\n");
    EXPECT_EQ(Out(r, "stderr"), "err\n");
  }
  EXPECT_EQ(DirectRankEnvironment(1, 2).size(), 7u);
}

TEST_F(DirectLaunchTest, ExitsWithTheFirstFailedRanksCodeAndStopsTheOthers) {
  const auto t0 = std::chrono::steady_clock::now();
  // Rank 1 fails; ranks 0 and 2 would sleep for a minute and end on SIGTERM at once.
  EXPECT_EQ(Launch({"sh", "-c", "if [ $RANK = 1 ]; then exit 3; fi; exec sleep 60"}, 3), 3);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(4));
  EXPECT_EQ(Launch({"sh", "-c", "kill -9 $$"}, 1), 128 + SIGKILL);
  EXPECT_EQ(Launch({"true"}, 2), 0);
  EXPECT_EQ(Launch({"/nonexistent/program"}, 1), 127);
  EXPECT_NE(Out(0, "stderr").find("cannot execute /nonexistent/program"), std::string::npos)
      << Out(0, "stderr");
}

TEST_F(DirectLaunchTest, ARankThatIgnoresSigtermIsKilledAfterTheGrace) {
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(Launch({"sh", "-c",
                    "if [ $RANK = 0 ]; then sleep 0.3; exit 5; fi; trap '' TERM; "
                    "while :; do sleep 0.05; done"},
                   2, /*grace_s=*/1),
            5);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, std::chrono::milliseconds(1200));
  EXPECT_LT(took, std::chrono::seconds(5));
}

// The agent's kill: SIGTERM to the ranks' groups, never to the launcher, which then exits as
// the ranks did.
TEST_F(DirectLaunchTest, RanksSignalledByTheAgentEndTheLauncherWithTheirSignal) {
  std::thread killer([this] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    // Every process of the launcher's session but the launcher: its ranks and their children.
    for (const auto& e : std::filesystem::directory_iterator("/proc")) {
      const std::string name = e.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      pid_t pid = std::stoi(name);
      if (pid != launcher_ && ::getsid(pid) == launcher_) ::kill(pid, SIGTERM);
    }
  });
  EXPECT_EQ(Launch({"sleep", "60"}, 2), 128 + SIGTERM);
  killer.join();
}

}  // namespace
}  // namespace agent
