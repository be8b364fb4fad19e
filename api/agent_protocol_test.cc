#include "api/agent_protocol.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace api {
namespace {

TEST(AgentProtocolTest, HeartbeatRoundTrip) {
  HeartbeatRequest r;
  r.running = {4, 5};
  r.finished.push_back({3, 3, "exited with code 3"});
  r.events.push_back({4, 1000, "step", {{"loss", 0.5}}});
  r.logs.push_back({4, 1, 10, "hello\n"});
  auto p = ParseHeartbeatRequest(ToJson(r));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->running, r.running);
  EXPECT_EQ(p->finished[0].exit_code, 3);
  EXPECT_TRUE(p->finished[0].killed);
  EXPECT_EQ(p->events[0].data["loss"], 0.5);
  EXPECT_EQ(p->logs[0].offset, 10);
  EXPECT_EQ(p->logs[0].data, "hello\n");
}

TEST(AgentProtocolTest, LaunchAcknowledgementsAreOptional) {
  HeartbeatRequest r;
  r.has_launched = true;
  r.launched = {{4, 0}, {9, 2}};
  auto p = ParseHeartbeatRequest(ToJson(r));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(p->has_launched);
  EXPECT_EQ(p->launched, r.launched);
  // An agent that holds nothing says so with an empty list, which is not the same as silence.
  HeartbeatRequest none;
  none.has_launched = true;
  auto empty = ParseHeartbeatRequest(ToJson(none));
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->has_launched);
  // Older agents do not send the field.
  auto older = ParseHeartbeatRequest({{"running", {4}}});
  ASSERT_TRUE(older.ok());
  EXPECT_FALSE(older->has_launched);
  EXPECT_FALSE(ParseHeartbeatRequest({{"launched", {{{"job_id", 4}, {"attempt", "0"}}}}}).ok());
  EXPECT_FALSE(ParseHeartbeatRequest({{"launched", {{{"job_id", 4}}}}}).ok());
}

TEST(AgentProtocolTest, FinishedJobsSayWhetherTheAgentSignalledThem) {
  HeartbeatRequest r;
  r.finished.push_back({3, 0, "", /*killed=*/false});
  auto p = ParseHeartbeatRequest(ToJson(r));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_FALSE(p->finished[0].killed);
  // An agent that does not say (older ones) is taken to have signalled it.
  auto older = ParseHeartbeatRequest({{"finished", {{{"job_id", 3}, {"exit_code", 0}}}}});
  ASSERT_TRUE(older.ok());
  EXPECT_TRUE(older->finished[0].killed);
  EXPECT_FALSE(
      ParseHeartbeatRequest({{"finished", {{{"job_id", 3}, {"exit_code", 0}, {"killed", "no"}}}}})
          .ok());
}

TEST(AgentProtocolTest, FinishedJobsCarryTheirLaunchTimingsAsDurations) {
  HeartbeatRequest r;
  api::FinishedJob f{3, 0, "exited with code 0"};
  f.timings = {12, 30, 90, 95, 97};
  r.finished.push_back(f);
  r.finished.push_back({4, 1, "cannot start"});  // never started: no timings on the wire
  r.finished.back().timings.slot_freed_ms = 5;   // ... but for the one it reached
  nlohmann::json j = ToJson(r);
  EXPECT_EQ(j["finished"][0]["timings"],
            nlohmann::json({{"sandbox_prepared_ms", 12}, {"process_started_ms", 30},
                            {"exited_ms", 90}, {"slot_freed_ms", 95}, {"reported_ms", 97}}));
  EXPECT_EQ(j["finished"][1]["timings"], nlohmann::json({{"slot_freed_ms", 5}}));
  auto p = ParseHeartbeatRequest(j);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->finished[0].timings, f.timings);
  EXPECT_EQ(p->finished[1].timings.slot_freed_ms, 5);
  EXPECT_EQ(p->finished[1].timings.process_started_ms, -1);
  // Older agents send none.
  EXPECT_TRUE(p->finished.size() == 2 && !p->finished[0].timings.Empty());
  auto older = ParseHeartbeatRequest({{"finished", {{{"job_id", 3}, {"exit_code", 0}}}}});
  ASSERT_TRUE(older.ok());
  EXPECT_TRUE(older->finished[0].timings.Empty());
  // Timings that go backwards, are negative, out of range or not integers are dropped whole,
  // and the report stands.
  for (const nlohmann::json& bad :
       {nlohmann::json({{"sandbox_prepared_ms", 50}, {"process_started_ms", 40}}),
        nlohmann::json({{"exited_ms", -1}}), nlohmann::json({{"exited_ms", 1.5}}),
        nlohmann::json({{"exited_ms", "7"}}), nlohmann::json({{"exited_ms", ~uint64_t{0}}}),
        nlohmann::json({{"exited_ms", api::kMaxLaunchTimingMs + 1}}), nlohmann::json("x")}) {
    auto q = ParseHeartbeatRequest(
        {{"finished", {{{"job_id", 3}, {"exit_code", 0}, {"timings", bad}}}}});
    ASSERT_TRUE(q.ok()) << bad.dump() << ": " << q.status().ToString();
    EXPECT_TRUE(q->finished[0].timings.Empty()) << bad.dump();
  }
}

TEST(AgentProtocolTest, LogChunksNameTheirAttempt) {
  HeartbeatRequest r;
  r.logs.push_back({3, 0, 0, "a\n", 2});
  r.logs.push_back({3, 0, 0, "b\n"});  // attempt unknown (-1): left off the wire
  nlohmann::json j = ToJson(r);
  EXPECT_EQ(j["logs"][0]["attempt"], 2);
  EXPECT_FALSE(j["logs"][1].contains("attempt"));
  auto p = ParseHeartbeatRequest(j);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->logs[0].attempt, 2);
  EXPECT_EQ(p->logs[1].attempt, -1);
  EXPECT_FALSE(ParseHeartbeatRequest(
                   {{"logs", {{{"job_id", 3}, {"rank", 0}, {"offset", 0}, {"data", ""},
                               {"attempt", "1"}}}}})
                   .ok());
}

TEST(AgentProtocolTest, FinishedJobsSayWhetherTheNodeLostThem) {
  HeartbeatRequest r;
  r.finished.push_back({3, 137, "lost", /*killed=*/false, /*lost=*/true});
  r.finished.push_back({4, 0, "", /*killed=*/false});
  auto p = ParseHeartbeatRequest(ToJson(r));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(p->finished[0].lost);
  EXPECT_FALSE(p->finished[1].lost);
  EXPECT_FALSE(ToJson(r)["finished"][1].contains("lost"));  // older servers see what they knew
  EXPECT_FALSE(
      ParseHeartbeatRequest({{"finished", {{{"job_id", 3}, {"exit_code", 0}, {"lost", 1}}}}}).ok());
}

// A finished job names its attempt; an older agent's report names none (-1: the current one).
TEST(AgentProtocolTest, FinishedJobsNameTheirAttempt) {
  HeartbeatRequest r;
  r.finished.push_back({3, 137, "killed", /*killed=*/true});
  r.finished.back().attempt = 2;
  r.finished.push_back({4, 0, ""});
  auto p = ParseHeartbeatRequest(ToJson(r));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->finished[0].attempt, 2);
  EXPECT_EQ(p->finished[1].attempt, -1);
  EXPECT_FALSE(ToJson(r)["finished"][1].contains("attempt"));
  EXPECT_FALSE(ParseHeartbeatRequest(
                   {{"finished", {{{"job_id", 3}, {"exit_code", 0}, {"attempt", "2"}}}}})
                   .ok());
}

TEST(AgentProtocolTest, CommandsRoundTrip) {
  HeartbeatResponse r;
  Command launch;
  launch.job_id = 9;
  launch.tenant = "default";
  launch.spec = {{"name", "x"}};
  launch.hosts = {{1, "n1", "127.0.0.1", 1}, {2, "n2", "127.0.0.1", 1}};
  launch.resume_from = "/ckpt/step-100.ckpt";
  launch.resume_checkpoint = {5, 9, 100, 4096, std::string(64, 'a')};
  r.commands.push_back(launch);
  Command kill;
  kill.type = Command::Type::kKill;
  kill.job_id = 8;
  r.commands.push_back(kill);
  auto p = ParseHeartbeatResponse(ToJson(r));
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->commands.size(), 2u);
  EXPECT_EQ(p->commands[0].hosts.size(), 2u);
  EXPECT_EQ(p->commands[0].resume_from, "/ckpt/step-100.ckpt");
  EXPECT_EQ(p->commands[0].resume_checkpoint.id, 5);
  EXPECT_EQ(p->commands[0].resume_checkpoint.step, 100);
  EXPECT_EQ(p->commands[0].resume_checkpoint.sha256, std::string(64, 'a'));
  EXPECT_EQ(p->commands[1].resume_checkpoint.id, 0);
  EXPECT_EQ(p->commands[1].type, Command::Type::kKill);
  EXPECT_TRUE(p->deferred.empty());
  EXPECT_FALSE(ToJson(r).contains("deferred"));  // absent when empty, as older servers send it
  r.deferred = {4, 6};
  auto d = ParseHeartbeatResponse(ToJson(r));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->deferred, (std::vector<int64_t>{4, 6}));
  nlohmann::json bad = ToJson(r);
  bad["deferred"] = {"4"};
  EXPECT_FALSE(ParseHeartbeatResponse(bad).ok());
}

TEST(AgentProtocolTest, MultiNodeLaunchAndWorkerRoundTrip) {
  HeartbeatResponse r;
  Command launch;
  launch.job_id = 9;
  launch.spec = {{"name", "x"}};
  launch.job_token = "secret";
  launch.hosts = {{1, "n1", "10.0.0.1", 2, "http://10.0.0.1:7001"},
                  {2, "n2", "10.0.0.2", 1, "http://10.0.0.2:7002"}};
  r.commands.push_back(launch);
  Command worker;
  worker.type = Command::Type::kWorker;
  worker.job_id = 9;
  worker.tenant_id = 4;
  worker.tenant = "acme";
  worker.attempt = 2;
  worker.spec = {{"kind", "command"}};
  worker.job_token_sha256 = std::string(64, 'b');
  worker.log_bytes = {{1, 100}};
  worker.peers = {"10.0.0.1", "10.0.0.2"};
  r.commands.push_back(worker);
  auto p = ParseHeartbeatResponse(ToJson(r));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->commands.size(), 2u);
  EXPECT_EQ(p->commands[0].job_token, "secret");
  EXPECT_EQ(p->commands[0].hosts[1].agent_url, "http://10.0.0.2:7002");
  const Command& w = p->commands[1];
  EXPECT_EQ(w.type, Command::Type::kWorker);
  EXPECT_EQ(w.tenant_id, 4);
  EXPECT_EQ(w.tenant, "acme");
  EXPECT_EQ(w.attempt, 2);
  EXPECT_EQ(w.spec, r.commands[1].spec);
  EXPECT_EQ(w.job_token_sha256, std::string(64, 'b'));
  EXPECT_EQ(w.log_bytes.at(1), 100);
  EXPECT_EQ(w.peers, (std::vector<std::string>{"10.0.0.1", "10.0.0.2"}));
  // A worker command without the token's digest is refused, not taken as "no credential".
  auto wire = ToJson(r);
  wire["commands"][1].erase("job_token_sha256");
  EXPECT_FALSE(ParseHeartbeatResponse(wire).ok());
}

// Worker assignments the agent holds are acknowledged like launches, and answered short.
TEST(AgentProtocolTest, HeldWorkerAssignmentsTravelShort) {
  HeartbeatRequest r;
  r.has_workers = true;
  r.workers = {{9, 2}};
  auto p = ParseHeartbeatRequest(ToJson(r));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(p->has_workers);
  EXPECT_EQ(p->workers, r.workers);
  auto older = ParseHeartbeatRequest({{"running", {4}}});
  ASSERT_TRUE(older.ok());
  EXPECT_FALSE(older->has_workers);
  EXPECT_FALSE(ParseHeartbeatRequest({{"workers", {{{"job_id", 9}}}}}).ok());

  HeartbeatResponse reply;
  Command held;
  held.type = Command::Type::kWorker;
  held.job_id = 9;
  held.attempt = 2;
  held.held = true;
  held.spec = {{"never", "sent"}};
  reply.commands.push_back(held);
  const nlohmann::json wire = ToJson(reply);
  EXPECT_FALSE(wire["commands"][0].contains("spec")) << wire.dump();
  EXPECT_FALSE(wire["commands"][0].contains("job_token_sha256")) << wire.dump();
  auto back = ParseHeartbeatResponse(wire);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->commands.size(), 1u);
  EXPECT_TRUE(back->commands[0].held);
  EXPECT_EQ(back->commands[0].attempt, 2);
  EXPECT_TRUE(back->commands[0].job_token_sha256.empty());
}

TEST(AgentProtocolTest, BadInputIsAnError) {
  EXPECT_FALSE(ParseRegisterRequest({{"name", "n"}}).ok());
  EXPECT_FALSE(ParseHeartbeatRequest({{"running", {"x"}}}).ok());
  auto ok = ParseRegisterRequest({{"name", "n"}, {"address", "127.0.0.1"}, {"cpu_slots", 2}});
  EXPECT_TRUE(ok.ok());
}

// Integers are integers in range: a float was cast with undefined behaviour (1e30 into an int,
// found by tests/fuzz under UBSan) and a large unsigned wrapped to a negative number.
TEST(AgentProtocolTest, IntegersMustBeIntegersInRange) {
  using nlohmann::json;
  const json reg = {{"name", "n"}, {"address", "a"}, {"cpu_slots", 1}};
  for (const json& bad : {json(1e30), json(2.5), json(4294967296LL), json(UINT64_MAX), json("4")}) {
    json r = reg;
    r["cpu_slots"] = bad;
    EXPECT_FALSE(ParseRegisterRequest(r).ok()) << bad.dump();
    r = reg;
    r["gpus"] = {{{"index", bad}}};
    EXPECT_FALSE(ParseRegisterRequest(r).ok()) << bad.dump();
  }
  json r = reg;
  r["memory_bytes"] = 1e300;
  EXPECT_FALSE(ParseRegisterRequest(r).ok());
  EXPECT_FALSE(ParseHeartbeatRequest({{"running", {1e300}}}).ok());
  EXPECT_FALSE(ParseHeartbeatRequest({{"running", {UINT64_MAX}}}).ok());
  EXPECT_FALSE(ParseHeartbeatRequest({{"finished", {{{"job_id", 1}, {"exit_code", 1e20}}}}}).ok());
  EXPECT_FALSE(
      ParseHeartbeatRequest(
          {{"logs", {{{"job_id", 1}, {"rank", 4294967296LL}, {"offset", 0}, {"data", ""}}}}})
          .ok());
  EXPECT_FALSE(
      ParseHeartbeatRequest({{"events", {{{"job_id", 1}, {"type", "step"}, {"time_ms", 0.5}}}}})
          .ok());
  auto fine = ParseHeartbeatRequest(
      {{"running", {INT64_MAX}}, {"finished", {{{"job_id", 2}, {"exit_code", -1}}}}});
  ASSERT_TRUE(fine.ok()) << fine.status().ToString();
  EXPECT_EQ(fine->running[0], INT64_MAX);
  EXPECT_EQ(fine->finished[0].exit_code, -1);
}

TEST(AgentProtocolTest, RegisterCarriesIsolationAndCredential) {
  RegisterRequest r;
  r.name = "n1";
  r.address = "10.0.0.2";
  r.cpu_slots = 4;
  r.isolation = {true, "v2", true};
  auto p = ParseRegisterRequest(ToJson(r));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(p->isolation.unprivileged_uid);
  EXPECT_EQ(p->isolation.cgroup, "v2");
  EXPECT_TRUE(p->isolation.rlimits);
  auto bad = ToJson(r);
  bad["isolation"]["cgroup"] = "v9";
  EXPECT_EQ(ParseRegisterRequest(bad).status().field(), "isolation.cgroup");
  // An agent that says nothing about isolation has none.
  auto old = ParseRegisterRequest({{"name", "n"}, {"address", "a"}, {"cpu_slots", 1}});
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->isolation.cgroup, "none");
  EXPECT_FALSE(old->isolation.unprivileged_uid);

  RegisterResponse resp{7, 500, "secret"};
  auto q = ParseRegisterResponse(ToJson(resp));
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->node_token, "secret");
  EXPECT_FALSE(ToJson(RegisterResponse{7, 500, ""}).contains("node_token"));
}

}  // namespace
}  // namespace api
