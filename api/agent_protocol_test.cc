#include "api/agent_protocol.h"

#include <gtest/gtest.h>

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
  EXPECT_EQ(p->events[0].data["loss"], 0.5);
  EXPECT_EQ(p->logs[0].offset, 10);
  EXPECT_EQ(p->logs[0].data, "hello\n");
}

TEST(AgentProtocolTest, CommandsRoundTrip) {
  HeartbeatResponse r;
  Command launch;
  launch.job_id = 9;
  launch.tenant = "default";
  launch.spec = {{"name", "x"}};
  launch.hosts = {{1, "n1", "127.0.0.1", 1}, {2, "n2", "127.0.0.1", 1}};
  launch.resume_from = "/ckpt/step-100.ckpt";
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
  EXPECT_EQ(p->commands[1].type, Command::Type::kKill);
}

TEST(AgentProtocolTest, BadInputIsAnError) {
  EXPECT_FALSE(ParseRegisterRequest({{"name", "n"}}).ok());
  EXPECT_FALSE(ParseHeartbeatRequest({{"running", {"x"}}}).ok());
  auto ok = ParseRegisterRequest({{"name", "n"}, {"address", "127.0.0.1"}, {"cpu_slots", 2}});
  EXPECT_TRUE(ok.ok());
}

}  // namespace
}  // namespace api
