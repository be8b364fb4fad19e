#include "agent/heartbeat/heartbeat_loop.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <deque>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "agent/testing/test_util.h"

namespace agent {
namespace {

// Records what the agent sends and answers with scripted outcomes.
class FakeServer : public ServerChannel {
 public:
  common::Result<api::RegisterResponse> Register(const api::RegisterRequest& req) override {
    registers.push_back(req);
    bearers.push_back("register " + credential->Bearer());
    if (!refuse_bearer.empty() && credential->Bearer() == refuse_bearer) {
      return common::Status(common::Code::kUnauthenticated, "unknown token");
    }
    return api::RegisterResponse{next_node_id++, 20, issue_node_token};
  }
  common::Result<api::HeartbeatResponse> Heartbeat(int64_t node_id,
                                                   const api::HeartbeatRequest& req) override {
    heartbeats.push_back({node_id, req});
    bearers.push_back("heartbeat " + credential->Bearer());
    if (!refuse_bearer.empty() && credential->Bearer() == refuse_bearer) {
      return common::Status(common::Code::kUnauthenticated, "unknown token");
    }
    if (!fail_with.empty()) {
      common::Status st = fail_with.front();
      fail_with.pop_front();
      return st;
    }
    api::HeartbeatResponse r;
    r.commands = std::move(reply_commands);
    reply_commands.clear();
    r.deferred = std::move(reply_deferred);
    reply_deferred.clear();
    return r;
  }

  const NodeCredential* credential = nullptr;  // what the real channel would send
  std::string issue_node_token;                // node_token in register replies
  std::string refuse_bearer;                   // answered 401
  std::vector<std::string> bearers;            // "register TOKEN" / "heartbeat TOKEN"
  int64_t next_node_id = 7;
  std::vector<api::RegisterRequest> registers;
  std::vector<std::pair<int64_t, api::HeartbeatRequest>> heartbeats;
  std::deque<common::Status> fail_with;
  std::vector<api::Command> reply_commands;
  std::vector<int64_t> reply_deferred;
};

class HeartbeatLoopTest : public ::testing::Test {
 protected:
  HeartbeatLoopTest()
      : credential_("join-token", dir_.path() + "/node.token"),
        runner_(Options(), &logs_),
        loop_(HeartbeatOptions{{"node-a", "127.0.0.1", "http://127.0.0.1:1", 4, 0, {}, {}}},
              &server_, &credential_, &runner_, &logs_, &events_, &metrics_) {
    server_.credential = &credential_;
  }

  JobRunnerOptions Options() {
    JobRunnerOptions o;
    o.jobs.data_dir = dir_.path();
    o.jobs.mpirun = "/nonexistent/mpirun";
    o.jobs.rank_exec = "/nonexistent/embody-agent";
    o.jobs.sandbox.switch_uid = false;
    return o;
  }

  TempDir dir_;
  NodeCredential credential_;
  FakeServer server_;
  RankLogs logs_;
  EventQueue events_;
  AgentMetrics metrics_;
  JobRunner runner_;
  HeartbeatLoop loop_;
};

TEST_F(HeartbeatLoopTest, RegistersThenHeartbeats) {
  EXPECT_EQ(loop_.RunOnce(), HeartbeatLoop::Outcome::kOk);
  ASSERT_EQ(server_.registers.size(), 1u);
  EXPECT_EQ(server_.registers[0].name, "node-a");
  EXPECT_EQ(loop_.node_id(), 7);
  EXPECT_EQ(loop_.interval().count(), 50);  // clamped from 20 ms
  ASSERT_EQ(server_.heartbeats.size(), 1u);
  EXPECT_EQ(server_.heartbeats[0].first, 7);
}

TEST_F(HeartbeatLoopTest, ReregistersWhenTheServerForgotTheNode) {
  ASSERT_EQ(loop_.RunOnce(), HeartbeatLoop::Outcome::kOk);
  server_.fail_with.push_back(common::NotFound("no such node"));
  EXPECT_EQ(loop_.RunOnce(), HeartbeatLoop::Outcome::kReregister);
  EXPECT_EQ(loop_.node_id(), 0);
  EXPECT_EQ(loop_.RunOnce(), HeartbeatLoop::Outcome::kOk);
  EXPECT_EQ(server_.registers.size(), 2u);
  EXPECT_EQ(loop_.node_id(), 8);
}

TEST_F(HeartbeatLoopTest, KeepsTheNodeCredentialAndUsesItFromThenOn) {
  server_.issue_node_token = "node-token-1";
  ASSERT_EQ(loop_.RunOnce(), HeartbeatLoop::Outcome::kOk);
  ASSERT_EQ(loop_.RunOnce(), HeartbeatLoop::Outcome::kOk);
  EXPECT_EQ(server_.bearers, (std::vector<std::string>{"register join-token",
                                                       "heartbeat node-token-1",
                                                       "heartbeat node-token-1"}));
  // Stored for the next start: 0600, and read back by a fresh credential.
  struct stat st;
  ASSERT_EQ(::stat((dir_.path() + "/node.token").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  NodeCredential restarted("join-token", dir_.path() + "/node.token");
  ASSERT_TRUE(restarted.Load().ok());
  EXPECT_EQ(restarted.Bearer(), "node-token-1");
}

TEST_F(HeartbeatLoopTest, ServerWithoutNodeCredentialsKeepsTheJoinToken) {
  ASSERT_EQ(loop_.RunOnce(), HeartbeatLoop::Outcome::kOk);
  ASSERT_EQ(loop_.RunOnce(), HeartbeatLoop::Outcome::kOk);
  EXPECT_EQ(server_.bearers, (std::vector<std::string>{"register join-token",
                                                       "heartbeat join-token",
                                                       "heartbeat join-token"}));
  EXPECT_FALSE(credential_.HasNodeToken());
  EXPECT_NE(::access((dir_.path() + "/node.token").c_str(), F_OK), 0);
}

TEST_F(HeartbeatLoopTest, RefusedNodeCredentialFallsBackToTheJoinToken) {
  server_.issue_node_token = "node-token-1";
  ASSERT_EQ(loop_.RunOnce(), HeartbeatLoop::Outcome::kOk);
  // The server revokes it: the heartbeat's 401 sends the agent back to the join token.
  server_.refuse_bearer = "node-token-1";
  server_.issue_node_token = "node-token-2";
  EXPECT_EQ(loop_.RunOnce(), HeartbeatLoop::Outcome::kReregister);
  EXPECT_FALSE(credential_.HasNodeToken());
  EXPECT_EQ(loop_.node_id(), 0);
  ASSERT_EQ(loop_.RunOnce(), HeartbeatLoop::Outcome::kOk);
  EXPECT_EQ(server_.bearers, (std::vector<std::string>{"register join-token",
                                                       "heartbeat node-token-1",
                                                       "heartbeat node-token-1",
                                                       "register join-token",
                                                       "heartbeat node-token-2"}));
  EXPECT_EQ(ReadAll(dir_.path() + "/node.token"), "node-token-2\n");

  // A restart that registers with a revoked stored credential retries with the join token at
  // once; a 401 to the join token itself is a plain failure.
  server_.refuse_bearer = "node-token-2";
  server_.issue_node_token = "";
  server_.bearers.clear();
  NodeCredential restarted("join-token", dir_.path() + "/node.token");
  ASSERT_TRUE(restarted.Load().ok());
  server_.credential = &restarted;
  HeartbeatLoop again(HeartbeatOptions{{"node-a", "127.0.0.1", "http://x", 4, 0, {}, {}}},
                      &server_, &restarted, &runner_, &logs_, &events_, &metrics_);
  ASSERT_EQ(again.RunOnce(), HeartbeatLoop::Outcome::kOk);
  EXPECT_EQ(server_.bearers, (std::vector<std::string>{"register node-token-2",
                                                       "register join-token",
                                                       "heartbeat join-token"}));
  server_.refuse_bearer = "join-token";
  EXPECT_EQ(again.RunOnce(), HeartbeatLoop::Outcome::kFailed);
  EXPECT_EQ(again.node_id(), 9);  // still registered; retried after a back-off
}

TEST_F(HeartbeatLoopTest, MalformedNodeCredentialsAreRefused) {
  EXPECT_FALSE(credential_.Adopt("two words").ok());
  EXPECT_FALSE(credential_.Adopt("line\r\nX-Injected: 1").ok());
  EXPECT_FALSE(credential_.Adopt(std::string(NodeCredential::kMaxTokenBytes + 1, 'a')).ok());
  EXPECT_FALSE(credential_.HasNodeToken());
  AppendTo(dir_.path() + "/node.token", "bad token\n");
  NodeCredential loaded("join-token", dir_.path() + "/node.token");
  EXPECT_FALSE(loaded.Load().ok());
  EXPECT_EQ(loaded.Bearer(), "join-token");
}

TEST_F(HeartbeatLoopTest, EventsAndFinishedJobsAreResentUntilAcknowledged) {
  ASSERT_EQ(loop_.RunOnce(), HeartbeatLoop::Outcome::kOk);
  events_.Push({3, 1, "step", {{"type", "step"}, {"step", 1}}});
  runner_.Kill(99);  // unknown job: reported finished at once
  server_.fail_with.push_back(common::Unavailable("down"));
  EXPECT_EQ(loop_.RunOnce(), HeartbeatLoop::Outcome::kFailed);
  EXPECT_EQ(loop_.RunOnce(), HeartbeatLoop::Outcome::kOk);
  ASSERT_EQ(server_.heartbeats.size(), 3u);
  for (int i : {1, 2}) {
    const auto& req = server_.heartbeats[i].second;
    ASSERT_EQ(req.events.size(), 1u);
    ASSERT_EQ(req.finished.size(), 1u);
    EXPECT_EQ(req.finished[0].job_id, 99);
    EXPECT_EQ(req.finished[0].reason.rfind("killed on cancel", 0), 0u);
  }
  EXPECT_EQ(loop_.RunOnce(), HeartbeatLoop::Outcome::kOk);
  EXPECT_TRUE(server_.heartbeats[3].second.events.empty());
  EXPECT_TRUE(server_.heartbeats[3].second.finished.empty());
  runner_.Kill(99);  // a late duplicate kill is ignored
  EXPECT_TRUE(runner_.Unreported().empty());
}

// An end the server defers (HeartbeatResponse::deferred) is kept and reported again with the
// next beat, and only then forgotten once taken.
TEST_F(HeartbeatLoopTest, AFinishedJobTheServerDefersIsReportedAgain) {
  ASSERT_EQ(loop_.RunOnce(), HeartbeatLoop::Outcome::kOk);
  runner_.Kill(98);  // unknown job: reported finished at once
  server_.reply_deferred = {98};
  EXPECT_EQ(loop_.RunOnce(), HeartbeatLoop::Outcome::kOk);
  ASSERT_EQ(runner_.Unreported().size(), 1u);
  EXPECT_EQ(loop_.RunOnce(), HeartbeatLoop::Outcome::kOk);
  ASSERT_EQ(server_.heartbeats.size(), 3u);
  for (int i : {1, 2}) {
    ASSERT_EQ(server_.heartbeats[i].second.finished.size(), 1u);
    EXPECT_EQ(server_.heartbeats[i].second.finished[0].job_id, 98);
  }
  EXPECT_TRUE(runner_.Unreported().empty());
}

TEST_F(HeartbeatLoopTest, LaunchCommandsReachTheRunner) {
  ASSERT_EQ(loop_.RunOnce(), HeartbeatLoop::Outcome::kOk);
  api::Command launch;
  launch.type = api::Command::Type::kLaunch;
  launch.job_id = 5;
  launch.tenant = "default";
  launch.spec = {{"kind", "command"}, {"command", {"true"}}};
  launch.hosts = {{7, "node-a", "127.0.0.1", 1}, {8, "node-b", "10.1.1.1", 1}};
  server_.reply_commands.push_back(launch);
  ASSERT_EQ(loop_.RunOnce(), HeartbeatLoop::Outcome::kOk);
  ASSERT_EQ(loop_.RunOnce(), HeartbeatLoop::Outcome::kOk);
  const auto& req = server_.heartbeats.back().second;
  ASSERT_EQ(req.finished.size(), 1u);
  EXPECT_EQ(req.finished[0].job_id, 5);
  EXPECT_EQ(req.finished[0].exit_code, 1);
  // A launch the agent cannot run (another host without an agent URL) is reported ended.
  EXPECT_EQ(req.finished[0].reason, "host 10.1.1.1 has no usable agent URL (\"\")");
}

// The server's side of launch acknowledgement, as NodeService does it: the launch is in every
// reply until a heartbeat lists it (or reports the job running or ended).
class AcknowledgingServer : public ServerChannel {
 public:
  common::Result<api::RegisterResponse> Register(const api::RegisterRequest&) override {
    return api::RegisterResponse{7, 20, ""};
  }
  common::Result<api::HeartbeatResponse> Heartbeat(int64_t,
                                                   const api::HeartbeatRequest& req) override {
    ++calls;
    requests.push_back(req);
    const api::LaunchAck mine{launch.job_id, launch.attempt};
    for (const auto& l : req.launched) acknowledged = acknowledged || l == mine;
    api::HeartbeatResponse r;
    if (!acknowledged || repeat_anyway) r.commands.push_back(launch);
    // The first reply is lost: the server committed it, the agent's client timed out.
    if (calls == 1) return common::Unavailable("heartbeat timed out");
    return r;
  }

  api::Command launch;
  bool acknowledged = false;
  bool repeat_anyway = false;  // a launch crossing its acknowledgement, or a confused server
  int calls = 0;
  std::vector<api::HeartbeatRequest> requests;
};

class LaunchAcknowledgementTest : public ::testing::Test {
 protected:
  LaunchAcknowledgementTest()
      : credential_("join-token", dir_.path() + "/node.token"),
        runner_(Options(), &logs_),
        loop_(HeartbeatOptions{{"node-a", "127.0.0.1", "http://127.0.0.1:1", 4, 0, {}, {}}},
              &server_, &credential_, &runner_, &logs_, &events_, &metrics_) {
    server_.launch.type = api::Command::Type::kLaunch;
    server_.launch.job_id = 5;
    server_.launch.attempt = 2;
    server_.launch.tenant = "default";
    server_.launch.spec = {{"kind", "command"}, {"command", {"true"}}};
    server_.launch.hosts = {{7, "node-a", "127.0.0.1", 1}};
  }

  // mpirun stands in as a script that notes each start in a file the test reads.
  JobRunnerOptions Options() {
    const std::string script = dir_.path() + "/mpirun";
    {
      std::ofstream out(script);
      // It runs until the test releases it, so the job is held while launches repeat.
      out << "#!/bin/sh\necho started >> " << Starts() << "\nwhile [ ! -e " << Release()
          << " ]; do sleep 0.02; done\n";
    }
    ::chmod(script.c_str(), 0755);
    JobRunnerOptions o;
    o.jobs.data_dir = dir_.path() + "/data";
    for (const char* sub : {"/jobs", "/logs", "/checkpoints", "/downloads"}) {
      std::filesystem::create_directories(o.jobs.data_dir + sub);
    }
    o.jobs.mpirun = script;
    o.jobs.rank_exec = "/nonexistent/embody-agent";
    o.jobs.sandbox.switch_uid = false;
    return o;
  }
  std::string Starts() const { return dir_.path() + "/starts"; }
  std::string Release() const { return dir_.path() + "/release"; }
  void ReleaseJobs() { std::ofstream(Release()) << "go"; }
  // Waits for the stand-in mpirun to have noted `n` starts.
  bool WaitStarts(int n) {
    for (int i = 0; i < 500 && StartCount() < n; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return StartCount() == n;
  }
  int StartCount() const {
    std::ifstream in(Starts());
    int n = 0;
    for (std::string line; std::getline(in, line);) ++n;
    return n;
  }

  TempDir dir_;
  NodeCredential credential_;
  AcknowledgingServer server_;
  RankLogs logs_;
  EventQueue events_;
  AgentMetrics metrics_;
  JobRunner runner_;
  HeartbeatLoop loop_;
};

TEST_F(LaunchAcknowledgementTest, ALostReplyLosesNoLaunchAndTheJobStartsOnce) {
  // The reply carrying the launch is lost: nothing starts, nothing is acknowledged.
  EXPECT_EQ(loop_.RunOnce(), HeartbeatLoop::Outcome::kFailed);
  EXPECT_EQ(runner_.HeldLaunches().size(), 0u);
  // The server hands it out again; this time it arrives and the job starts.
  ASSERT_EQ(loop_.RunOnce(), HeartbeatLoop::Outcome::kOk);
  EXPECT_TRUE(server_.requests.back().has_launched);
  EXPECT_TRUE(server_.requests.back().launched.empty());
  ASSERT_TRUE(WaitStarts(1));
  // The next heartbeat acknowledges it; a launch that crosses the acknowledgement is a no-op.
  server_.repeat_anyway = true;
  ASSERT_EQ(loop_.RunOnce(), HeartbeatLoop::Outcome::kOk);
  EXPECT_EQ(server_.requests.back().launched, (std::vector<api::LaunchAck>{{5, 2}}));
  EXPECT_TRUE(server_.acknowledged);
  server_.repeat_anyway = false;
  ReleaseJobs();
  ASSERT_TRUE(runner_.WaitFinished(5, std::chrono::seconds(10)).has_value());
  for (int i = 0; i < 5; ++i) ASSERT_EQ(loop_.RunOnce(), HeartbeatLoop::Outcome::kOk);
  bool reported = false;
  for (const auto& r : server_.requests) {
    for (const auto& f : r.finished) reported = reported || f.job_id == 5;
  }
  EXPECT_TRUE(reported);
  EXPECT_TRUE(runner_.HeldLaunches().empty());
  EXPECT_EQ(StartCount(), 1);
}

TEST_F(LaunchAcknowledgementTest, ARepeatedLaunchIsANoOpWhileTheJobIsHeld) {
  runner_.Launch(server_.launch);
  runner_.Launch(server_.launch);
  EXPECT_EQ(runner_.HeldLaunches(), (std::vector<api::LaunchAck>{{5, 2}}));
  ASSERT_TRUE(WaitStarts(1));
  api::Command other_attempt = server_.launch;
  other_attempt.attempt = 3;
  runner_.Launch(other_attempt);  // the server thinks it ended: still this one here
  ReleaseJobs();
  ASSERT_TRUE(runner_.WaitFinished(5, std::chrono::seconds(10)).has_value());
  runner_.Launch(server_.launch);  // ended, its end not yet acknowledged: still held
  EXPECT_EQ(runner_.HeldLaunches(), (std::vector<api::LaunchAck>{{5, 2}}));
  EXPECT_EQ(StartCount(), 1);
  // Once its end is acknowledged the server sends it no more: a launch now is a new placement
  // (a preempted job is requeued with its attempt unchanged) and starts.
  runner_.Acknowledge({5});
  EXPECT_TRUE(runner_.HeldLaunches().empty());
  runner_.Launch(server_.launch);
  ASSERT_TRUE(WaitStarts(2));
  ASSERT_TRUE(runner_.WaitFinished(5, std::chrono::seconds(10)).has_value());
}

// The server's side of held heartbeats, as NodeService does it: an idle heartbeat that asks to
// wait (wait_ms) is held until there is something for the node or its wait is over; Interrupt()
// aborts the call in flight, as the HTTP channel's does.
class HoldingServer : public ServerChannel {
 public:
  common::Result<api::RegisterResponse> Register(const api::RegisterRequest&) override {
    return api::RegisterResponse{7, kIntervalMs, ""};
  }
  common::Result<api::HeartbeatResponse> Heartbeat(int64_t,
                                                   const api::HeartbeatRequest& req) override {
    std::unique_lock<std::mutex> lock(mu);
    requests.push_back(req);
    api::HeartbeatResponse r;
    if (!launch_sent) {
      launch_sent = true;
      r.commands.push_back(launch);
      return r;
    }
    if (req.wait_ms > 0 && !req.finished.empty()) {
      // An end report waits for its scheduling pass only (NodeService::kPassWaitMs at most),
      // and is never given up by the agent.
      ++end_reports_held;
      cv.wait_for(lock, std::chrono::milliseconds(50), [this] { return interrupt; });
      if (interrupt) ++end_reports_interrupted;
      interrupt = false;
    } else if (req.wait_ms > 0) {
      ++held;
      cv.notify_all();
      const bool interrupted = cv.wait_for(lock, std::chrono::milliseconds(req.wait_ms),
                                           [this] { return interrupt; });
      interrupt = false;
      if (interrupted) return common::Unavailable("connection shut down");
    }
    return r;
  }
  void Interrupt() override {
    std::lock_guard<std::mutex> lock(mu);
    interrupt = true;
    cv.notify_all();
  }

  static constexpr int kIntervalMs = 30'000;
  std::mutex mu;
  std::condition_variable cv;
  api::Command launch;
  bool launch_sent = false;
  bool interrupt = false;
  int held = 0;
  int end_reports_held = 0;
  int end_reports_interrupted = 0;
  std::vector<api::HeartbeatRequest> requests;
};

TEST_F(LaunchAcknowledgementTest, AJobThatEndsAbortsTheHeldHeartbeatAndIsReportedAtOnce) {
  HoldingServer server;
  server.launch = server_.launch;
  HeartbeatLoop loop(HeartbeatOptions{{"node-a", "127.0.0.1", "http://127.0.0.1:1", 4, 0, {}, {}}},
                     &server, &credential_, &runner_, &logs_, &events_, &metrics_);
  runner_.SetOnFinish([&loop](int64_t) { loop.Wake(); });
  std::thread beats([&loop] { loop.Run(); });
  ASSERT_TRUE(WaitStarts(1));
  // Idle now (the job runs; nothing to report): the next heartbeat asks to be held for the
  // interval and is.
  {
    std::unique_lock<std::mutex> lock(server.mu);
    ASSERT_TRUE(server.cv.wait_for(lock, std::chrono::seconds(10), [&] { return server.held > 0; }));
    EXPECT_EQ(server.requests.back().wait_ms, HoldingServer::kIntervalMs);
    EXPECT_EQ(server.requests.back().launched, (std::vector<api::LaunchAck>{{5, 2}}));
  }
  const auto ended = std::chrono::steady_clock::now();
  ReleaseJobs();
  // Reported long before the 30 s hold would have ended: the end aborted the held call and the
  // next heartbeat carries the report, asking to wait for the scheduling pass it wakes.
  bool reported = false;
  for (int i = 0; i < 500 && !reported; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::lock_guard<std::mutex> lock(server.mu);
    for (const auto& r : server.requests) {
      for (const auto& f : r.finished) {
        if (f.job_id == 5) {
          reported = true;
          EXPECT_EQ(r.wait_ms, HoldingServer::kIntervalMs);
        }
      }
    }
  }
  EXPECT_TRUE(reported);
  EXPECT_LT(std::chrono::steady_clock::now() - ended, std::chrono::seconds(5));
  {
    // The end report was held, and not given up: it carries what must not be sent twice.
    std::unique_lock<std::mutex> lock(server.mu);
    ASSERT_TRUE(server.cv.wait_for(lock, std::chrono::seconds(10), [&] { return server.held > 1; }));
    EXPECT_GE(server.end_reports_held, 1);
    EXPECT_EQ(server.end_reports_interrupted, 0);
  }
  loop.Stop();  // aborts the held call it is in by now
  beats.join();
  runner_.SetOnFinish(nullptr);
}

}  // namespace
}  // namespace agent
