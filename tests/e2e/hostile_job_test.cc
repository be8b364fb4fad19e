// A job cannot stop its node: one that makes 20,000 rank directories, forges output in some of
// them and floods its own log leaves the node UP, the next job on it starts, finishes and reports
// normally, and only the job's own ranks' output reaches the server, with a marker where the
// flood was cut (the caps set low here; --job-log-mib-per-s and --job-log-burst-mib).
#include <string>

#include <gtest/gtest.h>

#include "tests/e2e/local_stack.h"

namespace embody_test {
namespace {

using nlohmann::json;

json Command(const std::string& name, const std::string& script) {
  return {{"name", name},
          {"kind", "command"},
          {"command", {"sh", "-c", script}},
          {"resources", {{"nodes", 1}, {"ranks_per_node", 1}}}};
}

TEST(HostileJobTest, RankDirectoriesAndALogFloodDoNotStopTheNode) {
  LocalStack stack(1, 1);
  // Caps far below the defaults (16 MiB/s, 64 MiB burst), so that a flood the test can afford
  // meets them.
  stack.AddAgentFlags({"--job-log-mib-per-s", "1", "--job-log-burst-mib", "2"});
  ASSERT_TRUE(stack.Start()) << "stack in " << stack.dir();
  // 20,000 rank directories at once (xargs: a few mkdir processes), forged output in some, then
  // 24 MiB written to stdout as fast as the job can.
  HttpResult hostile = stack.Post(
      "/v1/jobs",
      Command("hostile",
              "seq 1 20000 | sed 's|^|ranks/rank.|' | xargs mkdir -p && "
              "for i in 7 700 7000 19999; do echo forged > ranks/rank.$i/stdout; done && "
              "echo hostile-start && head -c 25165824 /dev/zero | tr '\\0' 'x' | fold -w 1000 && "
              "echo hostile-end")
          .dump());
  ASSERT_EQ(hostile.status, 201) << hostile.text;
  const int64_t id = hostile.body["id"];
  json job = stack.WaitForState(id, {"SUCCEEDED", "FAILED", "CANCELLED"}, 240);
  ASSERT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump(2);

  HttpResult next = stack.Post("/v1/jobs", Command("next", "echo next-ok").dump());
  ASSERT_EQ(next.status, 201) << next.text;
  const int64_t next_id = next.body["id"];
  json after = stack.WaitForState(next_id, {"SUCCEEDED", "FAILED", "CANCELLED"}, 120);
  ASSERT_EQ(after.value("state", ""), "SUCCEEDED") << after.dump(2);
  EXPECT_EQ(stack.Get("/v1/nodes").body["nodes"][0]["state"], "UP");

  // The next job's log arrives whole; the hostile job's holds its own rank only, cut with a
  // marker, never the forged ranks.
  std::string next_log;
  for (int i = 0; i < 100 && next_log.find("next-ok") == std::string::npos; ++i) {
    next_log = stack.Get("/v1/jobs/" + std::to_string(next_id) + "/logs").text;
    ::usleep(100'000);
  }
  EXPECT_NE(next_log.find("next-ok"), std::string::npos) << next_log;
  std::string log;
  for (int i = 0; i < 100 && log.find("[embody: dropped ") == std::string::npos; ++i) {
    log = stack.Get("/v1/jobs/" + std::to_string(id) + "/logs?rank=0").text;
    ::usleep(100'000);
  }
  EXPECT_NE(log.find("hostile-start"), std::string::npos);
  EXPECT_NE(log.find("[embody: dropped "), std::string::npos)
      << "no marker where the flood was cut";
  EXPECT_LT(log.size(), size_t{12} << 20) << "the flood was not capped";
  for (int rank : {7, 700, 7000, 19999}) {
    EXPECT_EQ(stack.Get("/v1/jobs/" + std::to_string(id) + "/logs?rank=" + std::to_string(rank))
                  .text.find("forged"),
              std::string::npos)
        << rank;
  }
  EXPECT_EQ(stack.Get("/v1/jobs/" + std::to_string(id) + "/logs").text.find("forged"),
            std::string::npos);
}

}  // namespace
}  // namespace embody_test
