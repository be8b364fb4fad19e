// Bring your own trainer, end to end: PostgreSQL + embody-server + two agents sharing a dataset
// root, on loopback. A user's PyTorch scripts run as command jobs with Debian's python3-torch
// (gloo): one opens the dataset its spec binds through embody.data; one is started by torchrun
// ("launcher": "torchrun"); examples/pytorch/train_bc.py trains on an imported dataset, is
// preempted by a job of higher priority, resumes from embody.resume_path() at the step it stopped
// at and ends with the loss of an undisturbed run. Skipped where python3-torch is not installed.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "storage/testing/robomimic_file.h"
#include "tests/e2e/local_stack.h"
#include "tests/e2e/stack_datasets.h"

namespace embody_test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

bool HaveTorch() {
  return std::system("/usr/bin/python3 -c 'import torch.distributed' >/dev/null 2>&1") == 0;
}

class ByoTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!HaveTorch()) return;
    stack_ = new LocalStack(2, 2);
    stack_->EnableDatasetRoot();
    stack_->AddServerFlags({"--preempt-min-priority", "90", "--preempt-grace-ms", "20000"});
    ASSERT_TRUE(stack_->Start()) << "stack in " << stack_->dir();
    // A robomimic-layout file, imported through the API as dataset "lift" of the admin's tenant.
    storage::testing::RobomimicFileSpec spec;
    spec.demos = 8;
    spec.frames = 40;
    spec.cameras = 0;
    json d = ImportRobomimicThroughApi(*stack_, "lift", spec);
    ASSERT_EQ(d.value("state", ""), "ready");
    dataset_dir_ = d["path"].get<std::string>();
  }
  static void TearDownTestSuite() {
    delete stack_;
    stack_ = nullptr;
  }
  void SetUp() override {
    if (!HaveTorch())
      GTEST_SKIP() << "no torch for /usr/bin/python3 (Debian package python3-torch)";
    ASSERT_NE(stack_, nullptr);
  }

  static int64_t Submit(const json& spec) { return stack_->SubmitJob(spec); }
  static json Finished(int64_t id, double timeout_s = 240) {
    return stack_->WaitForState(id, {"SUCCEEDED", "FAILED", "CANCELLED"}, timeout_s);
  }
  static std::string Logs(int64_t id, int rank) { return stack_->JobLog(id, rank); }
  // The job's last reported step, once the server has it.
  static json LastStep(int64_t id) {
    json step;
    for (int i = 0; i < 100; ++i) {
      step = stack_->Get("/v1/jobs/" + std::to_string(id)).body.value("last_step", json());
      if (step.is_object()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return step;
  }

  static LocalStack* stack_;
  static std::string dataset_dir_;
};

LocalStack* ByoTest::stack_ = nullptr;
std::string ByoTest::dataset_dir_;

TEST_F(ByoTest, ACommandJobOpensTheDatasetItsSpecBindsThroughTheSdk) {
  const std::string script =
      "import os, embody\n"
      "ds = embody.data.open('dataset:lift')\n"
      "s = ds.read_sample(5)\n"
      "print('opened', ds.path, ds.num_episodes, ds.num_samples, s.action_chunk.shape[1],\n"
      "      os.environ['EMBODY_DATASETS'], flush=True)\n"
      "embody.report(step=1, loss=float(ds.num_episodes))\n"
      "embody.flush()\n";
  json spec = {{"name", "reads-lift"},
               {"kind", "command"},
               {"resources", {{"nodes", 1}}},
               {"datasets", {"dataset:lift"}},
               {"command", {"/usr/bin/python3", "-c", script}}};
  const int64_t id = Submit(spec);
  ASSERT_GT(id, 0);
  json job = Finished(id);
  ASSERT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump(2) << Logs(id, -1) << Logs(id, 0);
  const std::string log = Logs(id, 0);
  EXPECT_NE(log.find("opened " + dataset_dir_ + " 8 320 7 {\"lift@1\":\"" + dataset_dir_ + "\"}"),
            std::string::npos)
      << log;
  EXPECT_EQ(LastStep(id).value("loss", 0.0), 8.0);
  // The stored spec keeps the name; the version stays bound while the job could still read it.
  EXPECT_EQ(job["spec"]["datasets"], json({"dataset:lift"})) << job.dump(2);

  // A dataset the tenant does not have is refused at submit, naming the entry.
  spec["datasets"] = {"dataset:lift", "dataset:nope"};
  HttpResult r = stack_->Post("/v1/jobs", spec.dump());
  EXPECT_EQ(r.status, 422) << r.text;
  EXPECT_EQ(r.body["error"].value("field", ""), "datasets[1]") << r.text;
}

TEST_F(ByoTest, TorchrunStartsTheNodesRanksForAScriptWrittenForIt) {
  // As a torchrun user writes it: the device from LOCAL_RANK, everything else from env://.
  const std::string script = stack_->dir() + "/torchrun_script.py";
  {
    std::FILE* f = std::fopen(script.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(
        "import os, torch, torch.distributed as dist\n"
        "local_rank = int(os.environ['LOCAL_RANK'])\n"
        "dist.init_process_group('gloo', init_method='env://')\n"
        "t = torch.tensor([float(dist.get_rank() + 1)])\n"
        "dist.all_reduce(t)\n"
        "print(f\"worker {dist.get_rank()} of {dist.get_world_size()} local {local_rank} \"\n"
        "      f\"node {os.environ['NODE_RANK']} sum {t.item()} \"\n"
        "      f\"elastic {os.environ.get('TORCHELASTIC_RUN_ID', '-')}\", flush=True)\n"
        "dist.destroy_process_group()\n",
        f);
    std::fclose(f);
    fs::permissions(script, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                                fs::perms::others_read);
  }
  json spec = {{"name", "torchrun"},
               {"kind", "command"},
               {"launcher", "torchrun"},
               {"resources", {{"nodes", 1}, {"ranks_per_node", 2}}},
               {"command", {script}}};
  const int64_t id = Submit(spec);
  ASSERT_GT(id, 0);
  json job = Finished(id);
  ASSERT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump(2) << Logs(id, -1) << Logs(id, 0);
  // One process on the node, torchrun, whose two workers write to its log.
  const std::string log = Logs(id, 0);
  EXPECT_NE(log.find("worker 0 of 2 local 0 node 0 sum 3.0 elastic"), std::string::npos) << log;
  EXPECT_NE(log.find("worker 1 of 2 local 1 node 0 sum 3.0 elastic"), std::string::npos) << log;
  EXPECT_EQ(log.find("elastic -"), std::string::npos) << "a worker not started by torchrun\n"
                                                      << log;
}

// "environment": {"python": VENV}: the job's python3 is the virtualenv's (under either
// launcher), which sees the system's torch through --system-site-packages; a virtualenv the
// job's uid cannot run is the job's error, said before any rank starts.
TEST_F(ByoTest, ACommandJobRunsThePythonOfTheVirtualenvItsSpecNames) {
  const std::string venv = stack_->dir() + "/inputs/venv";
  const std::string make = "/usr/bin/python3 -m venv --system-site-packages --without-pip " + venv;
  ASSERT_EQ(std::system(make.c_str()), 0) << make;
  const std::string script =
      "import os, sys, torch, embody\n"
      "print('prefix', sys.prefix, os.environ['VIRTUAL_ENV'], torch.__name__, flush=True)\n";
  json spec = {{"name", "venv"},
               {"kind", "command"},
               {"resources", {{"nodes", 1}}},
               {"environment", {{"python", venv + "/"}}},
               {"command", {"python3", "-c", script}}};
  int64_t id = Submit(spec);
  ASSERT_GT(id, 0);
  json job = Finished(id);
  ASSERT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump(2) << Logs(id, -1) << Logs(id, 0);
  EXPECT_NE(Logs(id, 0).find("prefix " + venv + " " + venv + " torch"), std::string::npos)
      << Logs(id, 0);
  EXPECT_EQ(job["spec"]["environment"], json({{"python", venv}})) << job.dump(2);

  // torchrun, and the workers it starts, run on the venv's python3 too.
  const std::string file = stack_->dir() + "/inputs/prefix.py";
  {
    std::FILE* f = std::fopen(file.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(script.c_str(), f);
    std::fclose(f);
  }
  fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                            fs::perms::others_read);
  spec["launcher"] = "torchrun";
  spec["command"] = {file};
  id = Submit(spec);
  ASSERT_GT(id, 0);
  job = Finished(id);
  ASSERT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump(2) << Logs(id, -1) << Logs(id, 0);
  EXPECT_NE(Logs(id, 0).find("prefix " + venv + " " + venv + " torch"), std::string::npos)
      << Logs(id, 0);

  // Missing on the node, or closed to the job's uid: the job fails saying so.
  spec.erase("launcher");
  spec["command"] = {"python3", "-c", script};
  spec["environment"]["python"] = stack_->dir() + "/inputs/no-venv";
  id = Submit(spec);
  ASSERT_GT(id, 0);
  job = Finished(id);
  EXPECT_EQ(job.value("state", ""), "FAILED") << job.dump(2);
  EXPECT_NE(job.dump().find("/inputs/no-venv/bin/python3 does not exist"), std::string::npos)
      << job.dump(2);
  fs::permissions(venv, fs::perms::owner_all);
  spec["environment"]["python"] = venv;
  id = Submit(spec);
  ASSERT_GT(id, 0);
  job = Finished(id);
  fs::permissions(venv, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec);
  EXPECT_EQ(job.value("state", ""), "FAILED") << job.dump(2);
  EXPECT_NE(job.dump().find("/bin/python3 is not a file the job's uid"), std::string::npos)
      << job.dump(2);

  // Refused at submit: a relative path, "..", an image (not built yet).
  for (const json& bad : {json{{"python", "venv"}}, json{{"python", venv + "/../venv"}},
                          json{{"image", "debian:12"}}}) {
    spec["environment"] = bad;
    HttpResult r = stack_->Post("/v1/jobs", spec.dump());
    EXPECT_TRUE(r.status == 422 || r.status == 400 || r.status == 501) << r.status << r.text;
    EXPECT_EQ(r.body["error"].value("field", "").rfind("environment.", 0), 0u) << r.text;
  }
}

// examples/pytorch/train_bc.py as its README submits it, but shorter.
json TrainBcSpec(const std::string& name, int priority, int steps) {
  return {{"name", name},
          {"kind", "command"},
          {"priority", priority},
          {"resources", {{"nodes", 1}, {"ranks_per_node", 2}}},
          {"datasets", {"dataset:lift"}},
          {"command",
           {"/usr/bin/python3", std::string(EMBODY_SOURCE_DIR) + "/examples/pytorch/train_bc.py",
            "--dataset", "dataset:lift", "--steps", std::to_string(steps), "--batch-size", "8",
            "--checkpoint-every", "0", "--log-every", "100"}}};
}

TEST_F(ByoTest, TheExamplePreemptedResumesFromItsCheckpointAndEndsAsAnUndisturbedRun) {
  constexpr int kSteps = 1500;
  const int64_t ref = Submit(TrainBcSpec("bc-reference", 10, kSteps));
  ASSERT_GT(ref, 0);
  json done_ref = Finished(ref, 300);
  ASSERT_EQ(done_ref.value("state", ""), "SUCCEEDED") << done_ref.dump(2) << Logs(ref, 0);
  const std::string ref_log = Logs(ref, 0);
  const size_t ref_done = ref_log.rfind("done: step " + std::to_string(kSteps - 1) + " loss ");
  ASSERT_NE(ref_done, std::string::npos) << ref_log;
  const std::string ref_loss = ref_log.substr(ref_done, ref_log.find('\n', ref_done) - ref_done);

  const int64_t low = Submit(TrainBcSpec("bc-low", 10, kSteps));
  ASSERT_GT(low, 0);
  const std::string low_path = "/v1/jobs/" + std::to_string(low);
  json job;
  for (int i = 0; i < 1200; ++i) {
    job = stack_->Get(low_path).body;
    if (job["last_step"].is_object() && job["last_step"].value("step", 0) >= 50) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(job.value("state", ""), "RUNNING") << job.dump(2);
  // Every slot of both nodes at priority 95: only by preempting the example.
  const int64_t high = Submit({{"name", "high"},
                               {"kind", "command"},
                               {"priority", 95},
                               {"resources", {{"nodes", 2}, {"ranks_per_node", 2}}},
                               {"command", {"true"}}});
  ASSERT_GT(high, 0);
  EXPECT_EQ(Finished(high).value("state", ""), "SUCCEEDED");
  json done_low = Finished(low, 300);
  ASSERT_EQ(done_low.value("state", ""), "SUCCEEDED") << done_low.dump(2) << Logs(low, 0);

  // It stopped on SIGTERM at a step, checkpointed it through the SDK, and the next attempt
  // started from embody.resume_path() at the step after it.
  json events = stack_->Get(low_path + "/events?type=state&limit=100").body["events"];
  int64_t requeued = -1;
  for (const auto& e : events) {
    if (e["data"]["to"] == "PENDING" && e["data"]["from"] == "RESTARTING") requeued = e["id"];
  }
  ASSERT_GT(requeued, 0) << "not preempted: " << events.dump();
  json ckpts = stack_->Get(low_path + "/events?type=checkpoint&limit=100").body["events"];
  ASSERT_GE(ckpts.size(), 2u) << ckpts.dump();  // the preemption's, then the final one
  const int64_t stopped_at = ckpts[0]["data"]["step"];
  EXPECT_GE(stopped_at, 50);
  EXPECT_LT(stopped_at, kSteps - 1);
  json after = stack_->Get(low_path + "/events?type=step&limit=1&after=" + std::to_string(requeued))
                   .body["events"];
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0]["data"]["step"], stopped_at + 1) << "the second attempt did not resume";
  const std::string log = Logs(low, 0);
  EXPECT_NE(log.find("stopped at step " + std::to_string(stopped_at)), std::string::npos) << log;
  EXPECT_NE(log.find("(step " + std::to_string(stopped_at) + ")"), std::string::npos) << log;
  // The same run as the undisturbed one, to the last bit of the printed loss.
  EXPECT_NE(log.find(ref_loss), std::string::npos) << ref_loss << "\n" << log;
}

}  // namespace
}  // namespace embody_test
