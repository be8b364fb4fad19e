// Node loss, end to end: a training job whose node disappears is restarted on the other node and
// resumes from its latest checkpoint instead of starting over.
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "tests/e2e/local_stack.h"

namespace embody_test {
namespace {

using nlohmann::json;

TEST(RestartTest, JobResumesFromCheckpointOnAnotherNodeAfterNodeLoss) {
  LocalStack stack(2, 1);
  ASSERT_TRUE(stack.Start()) << "stack in " << stack.dir();

  json spec = LocalStack::ResumableTrainSpec("e2e-restart");
  HttpResult sub = stack.Post("/v1/jobs", spec.dump());
  ASSERT_EQ(sub.status, 201) << sub.text;
  const int64_t id = sub.body["id"];
  const std::string path = "/v1/jobs/" + std::to_string(id);

  // Wait for the first checkpoint, then take the job's node away.
  json job;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    job = stack.Get(path).body;
    if (job.value("state", "") != "RUNNING" && job.value("state", "") != "SCHEDULED" &&
        job.value("state", "") != "PENDING") {
      break;
    }
    // Its nodes share no file system: the checkpoint must be in the server's blob store too.
    if (job.contains("latest_checkpoint") && job["latest_checkpoint"].is_object()) {
      HttpResult uploaded = stack.Get(path + "/checkpoints");
      if (uploaded.status == 200 && !uploaded.body["checkpoints"].empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(job.value("state", ""), "RUNNING") << "job ended before a checkpoint: " << job.dump(2);
  ASSERT_TRUE(job["latest_checkpoint"].is_object()) << job.dump(2);
  const std::string lost = job["allocation"][0]["node"];
  const int64_t checkpoint_step = job["latest_checkpoint"]["step"];
  ASSERT_LT(checkpoint_step, 600);
  stack.LoseNode(lost == "node-a" ? 0 : 1);

  job = stack.WaitForState(id, {"SUCCEEDED", "FAILED", "CANCELLED"}, 240);
  ASSERT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump(2);
  EXPECT_EQ(job["attempt"], 1);
  EXPECT_NE(job["allocation"][0]["node"], lost) << "restarted on the node that was lost";

  // The transitions tell the story: RUNNING -> RESTARTING -> PENDING -> ... -> SUCCEEDED.
  HttpResult st = stack.Get(path + "/events?type=state&limit=100");
  std::vector<std::string> to;
  for (const auto& e : st.body["events"]) to.push_back(e["data"]["to"]);
  EXPECT_NE(std::find(to.begin(), to.end(), "RESTARTING"), to.end()) << st.text;

  // The second attempt resumed: the launcher says so, and its first step comes after the
  // checkpoint instead of at step 1.
  HttpResult launcher = stack.Get(path + "/logs?rank=-1");
  EXPECT_NE(launcher.text.find("resuming from"), std::string::npos) << launcher.text;
  // Events are numbered in the order the server stored them: the first step stored after the
  // RESTARTING transition belongs to the second attempt.
  int64_t restart_event = -1;
  for (const auto& e : st.body["events"]) {
    if (e["data"]["to"] == "RESTARTING") restart_event = e["id"];
  }
  HttpResult after =
      stack.Get(path + "/events?type=step&limit=1&after=" + std::to_string(restart_event));
  ASSERT_EQ(after.status, 200) << after.text;
  ASSERT_EQ(after.body["events"].size(), 1u) << after.text;
  const int64_t first_after_restart = after.body["events"][0]["data"]["step"];
  ASSERT_GT(first_after_restart, 0) << "no step of the second attempt seen";
  EXPECT_GT(first_after_restart, checkpoint_step) << "the second attempt started over";
}

}  // namespace
}  // namespace embody_test
