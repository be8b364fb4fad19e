// Node loss without a shared file system: a job whose node dies together with its disk resumes
// on the other node from the latest checkpoint its agent uploaded to the server's blob store, and
// ends at the same step and loss as the same job run undisturbed. The two agents have separate
// data directories; the lost one's is deleted, so nothing on node A can be read by node B. Then a
// new job on two ranks starts (init_from) from the last checkpoint the one-rank job uploaded.
#include <chrono>
#include <cmath>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "tests/e2e/local_stack.h"

namespace embody_test {
namespace {

using nlohmann::json;

json Spec(const std::string& name) {
  json spec = json::parse(R"({
    "kind": "train", "max_restarts": 1,
    "resources": {"nodes": 1, "ranks_per_node": 1},
    "engine": {"model": {"d_model": 32, "layers": 1, "heads": 2, "mlp": 64},
               "data": {"rows_per_step": 1},
               "optim": {"steps": 500, "warmup_steps": 5},
               "checkpoint": {"every_steps": 20, "keep": 2}, "seed": 7}})");
  spec["name"] = name;
  return spec;
}

TEST(CheckpointStoreTest, JobResumesOnAnotherNodeFromTheBlobStoreAfterNodeAndDiskLoss) {
  // Two slots per node: after node A is gone, node B alone runs the two-rank init_from job.
  LocalStack stack(2, 2);
  ASSERT_TRUE(stack.Start()) << "stack in " << stack.dir();

  // The undisturbed run, for the final step and loss.
  HttpResult ref = stack.Post("/v1/jobs", Spec("undisturbed").dump());
  ASSERT_EQ(ref.status, 201) << ref.text;
  json done = stack.WaitForState(ref.body["id"], {"SUCCEEDED", "FAILED", "CANCELLED"}, 240);
  ASSERT_EQ(done.value("state", ""), "SUCCEEDED") << done.dump(2);
  const int64_t final_step = done["last_step"]["step"];
  const double final_loss = done["last_step"]["loss"];
  ASSERT_EQ(final_step, 500);
  // Its checkpoints reached the blob store too, kept per engine.checkpoint.keep.
  HttpResult ref_ckpts = stack.Get("/v1/jobs/" + ref.body["id"].dump() + "/checkpoints");
  ASSERT_EQ(ref_ckpts.status, 200) << ref_ckpts.text;
  EXPECT_GE(ref_ckpts.body["checkpoints"].size(), 1u) << ref_ckpts.text;
  EXPECT_LE(ref_ckpts.body["checkpoints"].size(), 2u) << ref_ckpts.text;

  HttpResult sub = stack.Post("/v1/jobs", Spec("disturbed").dump());
  ASSERT_EQ(sub.status, 201) << sub.text;
  const int64_t id = sub.body["id"];
  const std::string path = "/v1/jobs/" + std::to_string(id);

  // Wait until a checkpoint is in the blob store, then take the node and its disk away.
  json job;
  int64_t uploaded_step = -1;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline && uploaded_step < 0) {
    job = stack.Get(path).body;
    if (job.value("state", "") == "SUCCEEDED" || job.value("state", "") == "FAILED") break;
    HttpResult c = stack.Get(path + "/checkpoints");
    if (c.status == 200 && !c.body["checkpoints"].empty()) {
      uploaded_step = c.body["checkpoints"].back()["step"];
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GE(uploaded_step, 0) << "no checkpoint uploaded before the job ended: " << job.dump(2);
  job = stack.Get(path).body;
  ASSERT_EQ(job.value("state", ""), "RUNNING") << job.dump(2);
  const std::string lost = job["allocation"][0]["node"];
  const int lost_index = lost == "node-a" ? 0 : 1;
  stack.LoseNodeAndDisk(lost_index);
  ASSERT_FALSE(std::filesystem::exists(stack.agent_data_dir(lost_index)));

  job = stack.WaitForState(id, {"SUCCEEDED", "FAILED", "CANCELLED"}, 240);
  ASSERT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump(2);
  EXPECT_EQ(job["attempt"], 1);
  EXPECT_NE(job["allocation"][0]["node"], lost) << "restarted on the node that was lost";

  // The second attempt started from a checkpoint fetched from the server, not from step 0.
  HttpResult launcher = stack.Get(path + "/logs?rank=-1");
  EXPECT_NE(launcher.text.find("fetched from the server"), std::string::npos) << launcher.text;
  HttpResult st = stack.Get(path + "/events?type=state&limit=100");
  int64_t restart_event = -1;
  for (const auto& e : st.body["events"]) {
    if (e["data"]["to"] == "RESTARTING") restart_event = e["id"];
  }
  ASSERT_GT(restart_event, 0) << st.text;
  HttpResult after =
      stack.Get(path + "/events?type=step&limit=1&after=" + std::to_string(restart_event));
  ASSERT_EQ(after.body["events"].size(), 1u) << after.text;
  EXPECT_GT(after.body["events"][0]["data"]["step"].get<int64_t>(), uploaded_step)
      << "the second attempt started before the uploaded checkpoint";

  // And it ends where the undisturbed run ended.
  EXPECT_EQ(job["last_step"]["step"], final_step);
  EXPECT_NEAR(job["last_step"]["loss"].get<double>(), final_loss,
              1e-6 * std::max(1.0, std::fabs(final_loss)))
      << "undisturbed " << final_loss << ", resumed " << job["last_step"]["loss"];

  // init_from: a new job on two ranks starts from the last checkpoint the one-rank job uploaded.
  HttpResult ckpts = stack.Get(path + "/checkpoints");
  ASSERT_EQ(ckpts.status, 200) << ckpts.text;
  ASSERT_FALSE(ckpts.body["checkpoints"].empty()) << ckpts.text;
  const json from = ckpts.body["checkpoints"].back();
  json wide = Spec("from-checkpoint");
  wide["resources"] = {{"nodes", 1}, {"ranks_per_node", 2}};
  wide["engine"]["optim"]["steps"] = from["step"].get<int64_t>() + 40;
  wide["init_from"] = from["id"];
  HttpResult sub2 = stack.Post("/v1/jobs", wide.dump());
  ASSERT_EQ(sub2.status, 201) << sub2.text;
  const std::string path2 = "/v1/jobs/" + sub2.body["id"].dump();
  json job2 = stack.WaitForState(sub2.body["id"], {"SUCCEEDED", "FAILED", "CANCELLED"}, 240);
  ASSERT_EQ(job2.value("state", ""), "SUCCEEDED")
      << job2.dump(2) << stack.Get(path2 + "/logs?rank=-1").text;
  EXPECT_NE(stack.Get(path2 + "/logs?rank=-1").text.find("fetched from the server"),
            std::string::npos);
  HttpResult first = stack.Get(path2 + "/events?type=step&limit=1");
  ASSERT_EQ(first.body["events"].size(), 1u) << first.text;
  EXPECT_EQ(first.body["events"][0]["data"]["step"], from["step"].get<int64_t>() + 1);
  EXPECT_EQ(first.body["events"][0]["data"]["world_size"], 2);
  EXPECT_EQ(job2["last_step"]["step"], from["step"].get<int64_t>() + 40);
}

}  // namespace
}  // namespace embody_test
