// Agent faults, end to end: a job's processes do not outlive their agent's control.
//
// - kill -9 of the agent under a running training job: the node goes DOWN, the job restarts on
//   the other node from its checkpoint and succeeds, and the first attempt's processes on the dead
//   agent's node are gone within the orphan grace plus the kill grace, stopped by the job's
//   watcher: nothing in this test kills them.
// - kill -9 and an immediate restart of the agent: the restarted agent stops what the earlier one
//   left (long before the watcher's grace would), reports the job lost, and the job runs again,
//   once.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "tests/e2e/local_stack.h"

namespace embody_test {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The job's processes on node `i`: every process whose environment names the node's checkpoint
// directory for the job (mpirun and its ranks get it from the agent).
std::vector<int> JobProcessesOn(LocalStack& stack, int i, int64_t job) {
  return ProcessesWith("EMBODY_CHECKPOINT_DIR=" + stack.agent_data_dir(i) + "/checkpoints/job-" +
                       std::to_string(job));
}

double SecondsUntilGone(LocalStack& stack, int i, int64_t job, double timeout_s) {
  auto start = Clock::now();
  while (std::chrono::duration<double>(Clock::now() - start).count() < timeout_s) {
    if (JobProcessesOn(stack, i, job).empty()) {
      return std::chrono::duration<double>(Clock::now() - start).count();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return -1;
}

// Copies among `pids`: a process whose parent is also in the set is the same copy (a shell
// forks before it execs `sleep`, and for that moment the child has the shell's command line).
size_t Copies(const std::vector<int>& pids) {
  size_t copies = 0;
  for (int pid : pids) {
    std::string stat = ReadAll("/proc/" + std::to_string(pid) + "/stat");
    // pid (comm) state ppid ...: comm may hold spaces and parentheses, so read after the last ')'.
    const size_t close = stat.rfind(')');
    int ppid = 0;
    if (close != std::string::npos) {
      std::istringstream rest(stat.substr(close + 1));
      std::string state;
      rest >> state >> ppid;
    }
    if (std::find(pids.begin(), pids.end(), ppid) == pids.end()) ++copies;
  }
  return copies;
}

std::vector<std::string> StateChanges(LocalStack& stack, int64_t id) {
  HttpResult st = stack.Get("/v1/jobs/" + std::to_string(id) + "/events?type=state&limit=100");
  std::vector<std::string> to;
  for (const auto& e : st.body["events"]) to.push_back(e["data"]["to"]);
  return to;
}

TEST(AgentFaultsTest, KilledAgentsJobStopsAndResumesElsewhereFromItsCheckpoint) {
  constexpr int kOrphanGraceMs = 1000, kKillGraceMs = 3000;
  LocalStack stack(2, 1);
  stack.AddAgentFlags({"--orphan-grace-ms", std::to_string(kOrphanGraceMs), "--kill-grace-ms",
                       std::to_string(kKillGraceMs)});
  ASSERT_TRUE(stack.Start()) << "stack in " << stack.dir();

  json spec = LocalStack::ResumableTrainSpec("chaos-agent-kill");
  HttpResult sub = stack.Post("/v1/jobs", spec.dump());
  ASSERT_EQ(sub.status, 201) << sub.text;
  const int64_t id = sub.body["id"];
  const std::string path = "/v1/jobs/" + std::to_string(id);

  json job;
  auto deadline = Clock::now() + std::chrono::seconds(120);
  while (Clock::now() < deadline) {
    job = stack.Get(path).body;
    const std::string state = job.value("state", "");
    if (state != "RUNNING" && state != "SCHEDULED" && state != "PENDING") break;
    if (job.contains("latest_checkpoint") && job["latest_checkpoint"].is_object()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(job.value("state", ""), "RUNNING") << "job ended before a checkpoint: " << job.dump(2);
  const std::string lost_name = job["allocation"][0]["node"];
  const int lost = lost_name == "node-a" ? 0 : 1;
  const int64_t checkpoint_step = job["latest_checkpoint"]["step"];
  ASSERT_FALSE(JobProcessesOn(stack, lost, id).empty()) << "the job's processes are not visible";

  stack.KillAgent(lost);  // the agent only: its job's processes are left running
  // The watcher stops them: SIGTERM after the orphan grace, SIGKILL after the kill grace.
  const double slack_s = 5;
  const double gone_s =
      SecondsUntilGone(stack, lost, id, (kOrphanGraceMs + kKillGraceMs) / 1000.0 + slack_s);
  ASSERT_GE(gone_s, 0) << "the dead agent's job still runs: pids "
                       << ::testing::PrintToString(JobProcessesOn(stack, lost, id));
  std::printf("job processes gone %.2f s after the agent was killed (grace %d ms + %d ms)\n",
              gone_s, kOrphanGraceMs, kKillGraceMs);
  // The dead agent's job network rules stay until an agent starts on its data directory again.
  // Its node is another machine in a real cluster; here both agents share one kernel, and those
  // rules name the uid the other agent gives the job's next attempt.
  stack.RemoveJobNetworkTable(lost);

  // The node goes DOWN after 3 silent heartbeat intervals (300 ms here), seen by the next
  // scheduler cycle: the processes may well be gone before.
  auto node_state = [&] {
    const json nodes = stack.Get("/v1/nodes").body;
    for (const auto& n : nodes.value("nodes", json::array())) {
      if (n["name"] == lost_name) return n.value("state", "");
    }
    return std::string();
  };
  auto down_by = Clock::now() + std::chrono::seconds(10);
  while (node_state() != "DOWN" && Clock::now() < down_by) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(node_state(), "DOWN");
  job = stack.WaitForState(id, {"SUCCEEDED", "FAILED", "CANCELLED"}, 240);
  ASSERT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump(2);
  EXPECT_EQ(job["attempt"], 1);
  EXPECT_NE(job["allocation"][0]["node"], lost_name) << "restarted on the node that was lost";
  auto to = StateChanges(stack, id);
  EXPECT_NE(std::find(to.begin(), to.end(), "RESTARTING"), to.end());
  HttpResult launcher = stack.Get(path + "/logs?rank=-1");
  EXPECT_NE(launcher.text.find("resuming from"), std::string::npos) << launcher.text;
  // The second attempt started past the first one's checkpoint: the first step stored after the
  // RESTARTING transition is its.
  HttpResult st = stack.Get(path + "/events?type=state&limit=100");
  int64_t restart_event = -1;
  for (const auto& e : st.body["events"]) {
    if (e["data"]["to"] == "RESTARTING") restart_event = e["id"];
  }
  HttpResult after =
      stack.Get(path + "/events?type=step&limit=1&after=" + std::to_string(restart_event));
  ASSERT_EQ(after.status, 200) << after.text;
  ASSERT_EQ(after.body["events"].size(), 1u) << after.text;
  EXPECT_GT(after.body["events"][0]["data"]["step"].get<int64_t>(), checkpoint_step);
  // Nothing of the first attempt came back on the dead node.
  EXPECT_TRUE(JobProcessesOn(stack, lost, id).empty());
}

TEST(AgentFaultsTest, RestartedAgentStopsWhatItsPredecessorLeftAndReportsItLost) {
  LocalStack stack(1, 1);
  // A watcher that would wait a minute: whatever stops the job sooner is the restarted agent.
  stack.AddAgentFlags({"--orphan-grace-ms", "60000", "--kill-grace-ms", "2000"});
  ASSERT_TRUE(stack.Start()) << "stack in " << stack.dir();
  json spec = {{"name", "survives-agent-restart"},
               {"kind", "command"},
               {"max_restarts", 1},
               {"resources", {{"nodes", 1}, {"ranks_per_node", 1}}},
               {"command", {"sh", "-c", "echo attempt-start; sleep 6; echo attempt-done"}}};
  HttpResult sub = stack.Post("/v1/jobs", spec.dump());
  ASSERT_EQ(sub.status, 201) << sub.text;
  const int64_t id = sub.body["id"];
  json job = stack.WaitForState(id, {"RUNNING"}, 60);
  ASSERT_EQ(job.value("state", ""), "RUNNING") << job.dump(2);
  std::vector<int> first;
  for (int i = 0; i < 100 && first.empty(); ++i) {
    first = JobProcessesOn(stack, 0, id);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(first.empty());

  stack.KillAgent(0);
  ASSERT_TRUE(stack.RestartAgent(0));
  // The earlier agent's processes of the job (zombies, which a slow reaper may leave, do not
  // count: their environment is gone).
  auto left_of_first = [&] {
    std::vector<int> left;
    for (int p : JobProcessesOn(stack, 0, id)) {
      if (std::find(first.begin(), first.end(), p) != first.end()) left.push_back(p);
    }
    return left;
  };
  auto start = Clock::now();
  std::vector<int> left = left_of_first();
  while (!left.empty() && Clock::now() - start < std::chrono::seconds(20)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    left = left_of_first();
  }
  EXPECT_TRUE(left.empty()) << "processes the earlier agent left still run: "
                            << ::testing::PrintToString(left);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(20));

  // Never two copies of the job at once while it runs again, and it ends well, once.
  size_t most = 0;
  auto end = Clock::now() + std::chrono::seconds(90);
  while (Clock::now() < end) {
    job = stack.Get("/v1/jobs/" + std::to_string(id)).body;
    most = std::max(most, Copies(ProcessesWith("attempt-done")));
    const std::string s = job.value("state", "");
    if (s == "SUCCEEDED" || s == "FAILED" || s == "CANCELLED") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump(2);
  EXPECT_EQ(job["attempt"], 1);
  // The rank's shell is the one process whose command line says it (with its children of a
  // moment before they exec): one copy at most.
  EXPECT_LE(most, 1u);
  auto to = StateChanges(stack, id);
  EXPECT_NE(std::find(to.begin(), to.end(), "RESTARTING"), to.end());
  const std::string log = ReadAll(stack.restarted_agent_log(0));
  EXPECT_NE(log.find("reconciled a job an earlier agent held"), std::string::npos) << log;
  json events = stack.Get("/v1/jobs/" + std::to_string(id) + "/events?type=state&limit=100").body;
  bool reported_lost = false;
  for (const auto& e : events["events"]) {
    reported_lost = reported_lost || e.dump().find("agent restarted") != std::string::npos ||
                    e.dump().find("lost") != std::string::npos;
  }
  EXPECT_TRUE(reported_lost) << events.dump(2);
}

}  // namespace
}  // namespace embody_test
