// Pipelines through the public API on a live stack (docs/pipelines.md): the worked example of
// examples/pipelines/recipe.json run whole (import -> behaviour cloning on the imported demos and
// on sim:reach -> evaluation -> RL fine-tune from it -> evaluation -> FP8 quantisation and its
// evaluation -> a gate on losing at most 3 points of success), then cancel cascading to a
// running job, a retry that succeeds, a failed gate reporting its values, a hostile tenant
// finding nothing of another's, and no token at all.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "engine/testing/reach_hdf5.h"
#include "tests/e2e/local_stack.h"

namespace embody_test {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

using Tenant = LocalStack::Tenant;

class PipelineE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    stack_ = new LocalStack(2, 2);
    stack_->EnableDatasetRoot();
    ASSERT_TRUE(stack_->Start()) << "stack in " << stack_->dir();
    a_ = stack_->AddTenant("pipe-a");
    b_ = stack_->AddTenant("pipe-b");
  }
  static void TearDownTestSuite() {
    delete stack_;
    stack_ = nullptr;
  }


  // A directory every job uid may read and write (the tests' files and flags).
  static std::string Shared() {
    const std::string dir = stack_->dir() + "/inputs";
    fs::create_directories(dir);
    fs::permissions(dir, fs::perms::all);
    return dir;
  }

  static int64_t SubmitOk(const json& spec, const std::string& token) {
    HttpResult r = stack_->Post("/v1/pipelines", spec.dump(), token);
    EXPECT_EQ(r.status, 201) << r.text;
    return r.status == 201 ? r.body["id"].get<int64_t>() : 0;
  }

  // Polls the pipeline until its state is one of `states`.
  static json WaitFor(int64_t id, const std::vector<std::string>& states, double timeout_s,
                      const std::string& token) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    json p;
    while (std::chrono::steady_clock::now() < end) {
      p = stack_->Get("/v1/pipelines/" + std::to_string(id), token).body;
      for (const std::string& s : states) {
        if (p.value("state", "") == s) return p;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    ADD_FAILURE() << "pipeline " << id << " not in time: " << p.dump(2);
    return p;
  }

  static json StepOf(const json& p, const std::string& name) {
    for (const json& s : p.value("steps", json::array())) {
      if (s["name"] == name) return s;
    }
    ADD_FAILURE() << "no step " << name << " in " << p.dump();
    return json::object();
  }

  static json CommandStep(const std::string& name, const std::string& script) {
    return {{"name", name},
            {"job",
             {{"kind", "command"},
              {"resources", {{"nodes", 1}}},
              {"command", {"sh", "-c", script}}}}};
  }

  static LocalStack* stack_;
  static Tenant a_, b_;
  static int64_t recipe_;  // the worked example's pipeline, once it ran
};

LocalStack* PipelineE2eTest::stack_ = nullptr;
Tenant PipelineE2eTest::a_, PipelineE2eTest::b_;
int64_t PipelineE2eTest::recipe_ = 0;

TEST_F(PipelineE2eTest, TheWorkedExampleRunsToItsFp8Gate) {
  std::ifstream in(std::string(EMBODY_SOURCE_DIR) + "/examples/pipelines/recipe.json");
  std::stringstream text;
  text << in.rdbuf();
  json recipe = json::parse(text.str());
  // The example's demonstrations, written where the import job's uid can read them.
  const std::string demos = Shared() + "/reach_demos.hdf5";
  engine::testing::ReachHdf5Spec demo_spec;
  demo_spec.demos = 8;
  ASSERT_TRUE(engine::testing::WriteReachHdf5(demos, demo_spec).ok());
  fs::permissions(demos, fs::perms::owner_read | fs::perms::owner_write |
                             fs::perms::group_read | fs::perms::others_read);
  ASSERT_EQ(recipe["steps"][0]["name"], "import");
  recipe["steps"][0]["import"]["source"]["path"] = demos;

  const auto start = std::chrono::steady_clock::now();
  const int64_t id = SubmitOk(recipe, a_.member);
  ASSERT_GT(id, 0);
  const json p = WaitFor(id, {"succeeded", "failed", "cancelled"}, 540, a_.member);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("pipeline %s in %.1f s\n", p.value("state", "?").c_str(), seconds);
  for (const json& s : p["steps"]) {
    std::printf("  %-9s %-12s job %-4s attempts %s  %s\n", s["name"].get<std::string>().c_str(),
                s["state"].get<std::string>().c_str(), s["job_id"].dump().c_str(),
                s["attempts"].dump().c_str(), s["reason"].get<std::string>().c_str());
  }
  ASSERT_EQ(p["state"], "succeeded") << p.dump(2);
  const json gate = StepOf(p, "fp8-gate")["gate"];
  std::printf("fp8 gate: eval-fp8 %.3f >= eval-bc %.3f - 0.03 (%s)\n",
              gate["value"].get<double>(), gate["reference"]["value"].get<double>(),
              gate["passed"].get<bool>() ? "passed" : "failed");
  EXPECT_EQ(gate["passed"], true);
  // The gate read what the eval jobs stored.
  const int64_t eval_bc = StepOf(p, "eval-bc")["job_id"];
  HttpResult ev = stack_->Get("/v1/jobs/" + std::to_string(eval_bc) + "/evaluation", a_.member);
  ASSERT_EQ(ev.status, 200) << ev.text;
  EXPECT_DOUBLE_EQ(ev.body["tasks"][0]["success_rate"].get<double>(),
                   gate["reference"]["value"].get<double>());
  // Every step's job was the tenant's own, submitted by its member's token.
  HttpResult bc = stack_->Get("/v1/jobs/" + std::to_string(StepOf(p, "bc-demos")["job_id"].get<int64_t>()),
                              a_.member);
  ASSERT_EQ(bc.status, 200) << bc.text;
  EXPECT_EQ(bc.body["tenant_id"], a_.id);
  EXPECT_EQ(bc.body["spec"]["engine"]["data"]["dataset"].get<std::string>().rfind(
                "dataset:reach-demos@", 0),
            0u)
      << bc.text;
  recipe_ = id;
}

TEST_F(PipelineE2eTest, CancelWithNoBodyCascadesToTheRunningJob) {
  json after = CommandStep("after", "true");
  after["needs"] = {"long"};
  json spec = {{"name", "cancel-me"}, {"steps", {CommandStep("long", "sleep 120"), after}}};
  const int64_t id = SubmitOk(spec, a_.member);
  ASSERT_GT(id, 0);
  int64_t job = 0;
  for (int i = 0; i < 300 && job == 0; ++i) {
    const json p = stack_->Get("/v1/pipelines/" + std::to_string(id), a_.member).body;
    const json s = StepOf(p, "long");
    if (s["job_id"].is_number()) job = s["job_id"].get<int64_t>();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_GT(job, 0);
  stack_->WaitForState(job, {"RUNNING"}, 60);
  // Exactly what `curl -X POST .../cancel` sends: no body, no Content-Length.
  const std::string cmd = "curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Authorization: Bearer " +
                          a_.member + "' " + stack_->url() + "/v1/pipelines/" +
                          std::to_string(id) + "/cancel";
  FILE* f = popen(cmd.c_str(), "r");
  ASSERT_NE(f, nullptr);
  char code[8] = {0};
  ASSERT_NE(fgets(code, sizeof code, f), nullptr);
  pclose(f);
  EXPECT_STREQ(code, "200");
  const json done = stack_->WaitForState(job, {"CANCELLED", "FAILED", "SUCCEEDED"}, 60);
  EXPECT_EQ(done["state"], "CANCELLED") << done.dump(2);
  const json p = WaitFor(id, {"cancelled"}, 60, a_.member);
  EXPECT_EQ(StepOf(p, "long")["state"], "cancelled");
  EXPECT_EQ(StepOf(p, "after")["state"], "cancelled");
  EXPECT_TRUE(StepOf(p, "after")["job_id"].is_null());  // never submitted
}

TEST_F(PipelineE2eTest, AFailedStepIsRetriedAndThenSucceeds) {
  // The first attempt removes the flag and fails; the second finds none and succeeds. The file
  // is the test's (root's), so the node's clean-up of what a job's uid left in /tmp spares it;
  // the directory lets any uid remove it.
  const std::string flag = Shared() + "/retry-flag";
  std::ofstream(flag) << "fail once\n";
  json flaky = CommandStep(
      "flaky", "if [ -e " + flag + " ]; then rm -f " + flag + "; exit 3; else exit 0; fi");
  flaky["retries"] = 1;
  json spec = {{"name", "retry"}, {"steps", {flaky}}};
  const int64_t id = SubmitOk(spec, a_.member);
  const json p = WaitFor(id, {"succeeded", "failed"}, 180, a_.member);
  const json s = StepOf(p, "flaky");
  EXPECT_EQ(p["state"], "succeeded") << p.dump(2);
  ASSERT_EQ(s["attempts"], 2) << s.dump();
  HttpResult first = stack_->Get("/v1/jobs/" + s["jobs"][0].dump(), a_.member);
  EXPECT_EQ(first.body["state"], "FAILED") << first.text;
  EXPECT_EQ(first.body["exit_code"], 3) << first.text;
}

TEST_F(PipelineE2eTest, AFailedGateReportsTheValuesItCompared) {
  ASSERT_GT(recipe_, 0) << "needs the worked example's checkpoints";
  const json r = stack_->Get("/v1/pipelines/" + std::to_string(recipe_), a_.member).body;
  const int64_t bc = StepOf(r, "bc")["job_id"];
  json spec = {{"name", "strict"},
               {"steps",
                {{{"name", "eval"},
                  {"job",
                   {{"kind", "eval"},
                    {"resources", {{"nodes", 1}}},
                    {"eval", {{"checkpoint_from_job", bc}, {"tasks", {"reach"}}, {"episodes", 4}}}}}},
                 {{"name", "gate"},
                  {"needs", {"eval"}},
                  {"when", {{"step", "eval"}, {"metric", "success_rate"}, {"at_least", 1.01}}}},
                 CommandStep("after", "true")}}};
  spec["steps"][2]["needs"] = {"gate"};
  const int64_t id = SubmitOk(spec, a_.member);
  const json p = WaitFor(id, {"succeeded", "failed"}, 180, a_.member);
  EXPECT_EQ(p["state"], "failed");
  const json gate = StepOf(p, "gate");
  EXPECT_EQ(gate["state"], "gate_failed") << gate.dump();
  EXPECT_EQ(gate["gate"]["threshold"], 1.01);
  EXPECT_TRUE(gate["gate"]["value"].is_number()) << gate.dump();
  EXPECT_EQ(gate["gate"]["passed"], false);
  EXPECT_NE(gate["reason"].get<std::string>().find("below the threshold 1.0100"), std::string::npos);
  EXPECT_EQ(StepOf(p, "after")["state"], "skipped");
}

TEST_F(PipelineE2eTest, AHostileTenantFindsNothingOfAnothers) {
  json spec = {{"name", "mine"}, {"steps", {CommandStep("a", "true")}}};
  const int64_t id = SubmitOk(spec, a_.member);
  const std::string at = "/v1/pipelines/" + std::to_string(id);
  HttpResult g = stack_->Get(at, b_.member);
  EXPECT_EQ(g.status, 404) << g.text;
  EXPECT_EQ(stack_->Post(at + "/cancel", "", b_.member).status, 404);
  HttpResult list = stack_->Get("/v1/pipelines", b_.member);
  EXPECT_EQ(list.status, 200);
  EXPECT_TRUE(list.body["pipelines"].empty()) << list.text;
  // A step naming a's job or dataset: not found, as ids that never existed, and nothing stored.
  const json mine = WaitFor(id, {"succeeded", "failed"}, 120, a_.member);
  const int64_t a_job = StepOf(mine, "a")["job_id"];
  json steal = {{"name", "steal"},
                {"steps",
                 {{{"name", "e"},
                   {"job",
                    {{"kind", "eval"},
                     {"resources", {{"nodes", 1}}},
                     {"eval", {{"checkpoint_from_job", a_job}}}}}}}}};
  HttpResult r = stack_->Post("/v1/pipelines", steal.dump(), b_.member);
  EXPECT_EQ(r.status, 404) << r.text;
  EXPECT_EQ(r.body["error"]["field"], "steps[0].job.eval.checkpoint_from_job");
  json data = {{"name", "steal-data"},
               {"steps",
                {{{"name", "t"},
                  {"job",
                   {{"kind", "train"},
                    {"resources", {{"nodes", 1}}},
                    {"engine", {{"data", {{"dataset", "dataset:reach-demos"}}},
                                {"optim", {{"steps", 20}}}}}}}}}}};
  const int64_t sid = SubmitOk(data, b_.member);
  const json stolen = WaitFor(sid, {"failed", "succeeded"}, 60, b_.member);
  EXPECT_EQ(stolen["state"], "failed");
  // The answer b gets for any name it has no version of: nothing says a's exists.
  EXPECT_NE(StepOf(stolen, "t")["reason"].get<std::string>().find(
                "dataset \"reach-demos\" has no ready version"),
            std::string::npos)
      << stolen.dump(2);
  EXPECT_TRUE(StepOf(stolen, "t")["jobs"].empty());
  HttpResult b_jobs = stack_->Get("/v1/jobs", b_.member);
  EXPECT_TRUE(b_jobs.body["jobs"].empty()) << b_jobs.text;
}

TEST_F(PipelineE2eTest, NoTokenIsUnauthenticated) {
  HttpResult g = stack_->Get("/v1/pipelines", "not-a-token");
  EXPECT_EQ(g.status, 401) << g.text;
  HttpResult p = stack_->Post("/v1/pipelines", json{{"name", "x"}}.dump(), "not-a-token");
  EXPECT_EQ(p.status, 401) << p.text;
  EXPECT_EQ(stack_->Post("/v1/pipelines/1/cancel", "", "not-a-token").status, 401);
}

}  // namespace
}  // namespace embody_test
