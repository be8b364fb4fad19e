// The embody-agent binary itself (EMBODY_AGENT_BINARY): what agent::Agent wires together is
// served on /metrics and logged, with no server running (registration keeps failing, which is
// fine here).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <sstream>
#include <thread>

#include <httplib.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/testing/test_util.h"

namespace agent {
namespace {

class AgentProcess {
 public:
  // `init_fail`: start the agent with FAKE_NVML_INIT_FAIL set (nvmlInit fails as without driver).
  AgentProcess(const std::string& dir, const std::string& nvml_library, bool init_fail) {
    port_file_ = dir + "/port";
    log_file_ = dir + "/agent.log";
    std::vector<std::string> args = {EMBODY_AGENT_BINARY, "--server",   "http://127.0.0.1:1",
                                     "--token",           "t",          "--name",
                                     "node-main-test",    "--data-dir", dir + "/data",
                                     "--port-file",       port_file_,   "--nvml-library",
                                     nvml_library};
    pid_ = ::fork();
    if (pid_ == 0) {
      int fd = ::open(log_file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 2);
      if (init_fail) {
        ::setenv("FAKE_NVML_INIT_FAIL", "1", 1);
      } else {
        ::unsetenv("FAKE_NVML_INIT_FAIL");
      }
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }
  ~AgentProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  // The port the agent wrote, waiting up to 10 s; 0 if none.
  int Port() const {
    for (int i = 0; i < 200; ++i) {
      std::string text = ReadAll(port_file_);
      if (!text.empty() && text.back() == '\n') return std::stoi(text);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return 0;
  }
  std::string Log() const { return ReadAll(log_file_); }

 private:
  pid_t pid_ = -1;
  std::string port_file_, log_file_;
};

TEST(AgentMainTest, ServesNodeAndGpuSeriesFromTheStandInNvml) {
  TempDir dir;
  AgentProcess agent(dir.path(), EMBODY_FAKE_NVML, /*init_fail=*/false);
  int port = agent.Port();
  ASSERT_GT(port, 0) << agent.Log();
  httplib::Client client("127.0.0.1", port);
  auto r = client.Get("/metrics");
  ASSERT_TRUE(r) << agent.Log();
  for (const char* s :
       {"embody_node_gpus 2", "embody_node_cpu_utilization_ratio ",
        "embody_node_memory_used_bytes ", "embody_node_memory_total_bytes ",
        R"(DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-11111111-2222-3333-4444-555555555555",)",
        R"(DCGM_FI_DEV_FB_USED{gpu="1",)"}) {
    EXPECT_TRUE(Has(r->body, s)) << s << "\n" << r->body;
  }
}

TEST(AgentMainTest, NvmlInitFailureOrNoLibraryMeansZeroGpusAndNoFailure) {
  for (bool init_fail : {true, false}) {
    TempDir dir;
    std::string library = init_fail ? EMBODY_FAKE_NVML : dir.path() + "/no-libnvidia-ml.so.1";
    AgentProcess agent(dir.path(), library, init_fail);
    int port = agent.Port();
    ASSERT_GT(port, 0) << agent.Log();
    httplib::Client client("127.0.0.1", port);
    auto r = client.Get("/metrics");
    ASSERT_TRUE(r) << agent.Log();
    EXPECT_TRUE(Has(r->body, "embody_node_gpus 0")) << r->body;
    EXPECT_FALSE(Has(r->body, "DCGM_")) << r->body;
    EXPECT_TRUE(Has(r->body, "embody_node_memory_total_bytes")) << r->body;
  }
}

TEST(AgentMainTest, AccessLogIsJsonWithTheRequestId) {
  TempDir dir;
  AgentProcess agent(dir.path(), dir.path() + "/none.so", false);
  int port = agent.Port();
  ASSERT_GT(port, 0) << agent.Log();
  httplib::Client client("127.0.0.1", port);
  auto r = client.Post("/v1/local/jobs/5/events", httplib::Headers{{"X-Request-Id", "req-main-1"}},
                       R"({"type":"step"})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(r->get_header_value("X-Request-Id"), "req-main-1");

  // The line is written after the response is sent; wait for it.
  nlohmann::json found;
  for (int i = 0; i < 100 && found.is_null(); ++i) {
    std::istringstream lines(agent.Log());
    std::string line;
    while (std::getline(lines, line)) {
      auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      ASSERT_FALSE(j.is_discarded()) << "not JSON: " << line;
      if (j.value("request_id", "") == "req-main-1") found = j;
    }
    if (found.is_null()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(found.is_null()) << agent.Log();
  EXPECT_EQ(found["component"], "agent");
  EXPECT_EQ(found["level"], "warn");
  EXPECT_EQ(found["msg"], "http request");
  EXPECT_EQ(found["method"], "POST");
  EXPECT_EQ(found["route"], "/v1/local/jobs/{id}/events");
  EXPECT_EQ(found["status"], "404");
  EXPECT_TRUE(found.contains("ms"));
}

}  // namespace
}  // namespace agent
