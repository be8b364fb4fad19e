// Kind eval on the in-memory twin (label unit): the eval block resolves to a checkpoint of the
// submitter's tenant only (what a hostile tenant would try is not found, and stores nothing),
// results from the job's `eval` event are stored per task and read back by the job's tenant.
#include "controlplane/service/evaluations.h"

#include <gtest/gtest.h>

#include "controlplane/service/checkpoint_index.h"
#include "controlplane/testing/memory_service_fixture.h"

namespace controlplane::service {
namespace {

using common::Code;

class EvaluationsTest : public testing::TwoTenantServiceTest {
 protected:
  // A checkpoint of `job` (tenant `tenant`), ready or still uploading; returns its id.
  int64_t AddCheckpoint(int64_t job, int64_t tenant, int64_t step, bool ready = true) {
    auto uow = Begin();
    CheckpointBlob c;
    c.job_id = job;
    c.tenant_id = tenant;
    c.step = step;
    c.bytes = 10;
    c.sha256 = std::string(64, 'a');
    c.state = "uploading";
    auto id = uow->checkpoints().InsertUpload(c, now_.load());
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    if (ready) {
      EXPECT_TRUE(uow->checkpoints().MarkReady(*id, now_.load()).ok());
    }
    EXPECT_TRUE(uow->Commit().ok());
    return *id;
  }

  static std::string EvalSpec(const std::string& source) {
    return R"({"name":"ev","kind":"eval","resources":{"nodes":1},"eval":{)" + source +
           R"(,"tasks":["reach","push"],"episodes":10}})";
  }
};

TEST_F(EvaluationsTest, TheEvalBlockBecomesInitFromOfTheTenantsOwnCheckpoint) {
  auto jobs = Jobs();
  const int64_t trained = jobs.Submit(member_, Spec("bc"), "")->job.job.id;
  AddCheckpoint(trained, a_, 100);
  const int64_t latest = AddCheckpoint(trained, a_, 200);
  AddCheckpoint(trained, a_, 300, /*ready=*/false);  // an upload in flight is not evaluated
  auto ev =
      jobs.Submit(member_, EvalSpec(R"("checkpoint_from_job":)" + std::to_string(trained)), "");
  ASSERT_TRUE(ev.ok()) << ev.status().ToString();
  EXPECT_EQ(ev->job.job.kind, "eval");
  EXPECT_EQ(ev->job.job.spec["init_from"], latest);
  EXPECT_EQ(ev->job.job.spec["eval"]["checkpoint_from_job"], trained);
  const int64_t first = AddCheckpoint(trained, a_, 50);
  auto by_id = jobs.Submit(member_, EvalSpec(R"("checkpoint":)" + std::to_string(first)), "");
  ASSERT_TRUE(by_id.ok()) << by_id.status().ToString();
  EXPECT_EQ(by_id->job.job.spec["init_from"], first);
}

TEST_F(EvaluationsTest, AHostileTenantFindsNothingToEvaluate) {
  auto jobs = Jobs();
  const int64_t theirs = jobs.Submit(other_, Spec("theirs"), "")->job.job.id;
  const int64_t their_ckpt = AddCheckpoint(theirs, b_, 100);
  const int64_t mine = jobs.Submit(member_, Spec("mine"), "")->job.job.id;
  const int64_t uploading = AddCheckpoint(mine, a_, 10, /*ready=*/false);
  const int64_t before = CountJobs();
  struct Case {
    const char* what;
    std::string body;
    Code code;
    const char* field;
  };
  const std::vector<Case> cases = {
      {"another tenant's job", EvalSpec(R"("checkpoint_from_job":)" + std::to_string(theirs)),
       Code::kNotFound, "eval.checkpoint_from_job"},
      {"a job that does not exist", EvalSpec(R"("checkpoint_from_job":999999)"), Code::kNotFound,
       "eval.checkpoint_from_job"},
      {"another tenant's checkpoint", EvalSpec(R"("checkpoint":)" + std::to_string(their_ckpt)),
       Code::kNotFound, "eval.checkpoint"},
      {"an upload not ready", EvalSpec(R"("checkpoint":)" + std::to_string(uploading)),
       Code::kNotFound, "eval.checkpoint"},
      {"own job without a ready checkpoint",
       EvalSpec(R"("checkpoint_from_job":)" + std::to_string(mine)), Code::kFailedPrecondition,
       "eval.checkpoint_from_job"},
      // init_from would skip the resolution: refused even when it names an own checkpoint.
      {"init_from of its own",
       R"({"name":"ev","kind":"eval","resources":{"nodes":1},"init_from":)" +
           std::to_string(their_ckpt) + R"(,"eval":{"checkpoint_from_job":)" +
           std::to_string(mine) + "}}",
       Code::kInvalidArgument, "init_from"},
  };
  for (const Case& c : cases) {
    auto r = jobs.Submit(member_, c.body, "");
    ASSERT_FALSE(r.ok()) << c.what;
    EXPECT_EQ(r.status().code(), c.code) << c.what << ": " << r.status().ToString();
    EXPECT_EQ(r.status().field(), c.field) << c.what;
    // Not found reads the same as for an id that never existed: nothing about b leaks.
    if (c.code == Code::kNotFound) {
      EXPECT_EQ(r.status().message().find("tenant"), std::string::npos) << c.what;
    }
  }
  EXPECT_EQ(CountJobs(), before);  // nothing stored
}

// FP8 evaluation quantises behaviour-cloning checkpoints: one from an rl job (an rl policy) is
// refused at submit, naming eval.fp8, by job or by checkpoint id, and nothing is stored.
TEST_F(EvaluationsTest, Fp8EvaluationOfAnRlPolicyIsRefusedAtSubmit) {
  auto jobs = Jobs();
  auto rl = jobs.Submit(
      member_, R"({"name":"rl","kind":"rl","resources":{"nodes":1},"engine":{"rl":{"task":"reach"}}})",
      "");
  ASSERT_TRUE(rl.ok()) << rl.status().ToString();
  const int64_t rl_job = rl->job.job.id;
  const int64_t rl_ckpt = AddCheckpoint(rl_job, a_, 40);
  const int64_t bc_job = jobs.Submit(member_, Spec("bc"), "")->job.job.id;
  const int64_t bc_ckpt = AddCheckpoint(bc_job, a_, 600);
  const auto fp8_spec = [](const std::string& source) {
    return R"({"name":"ev","kind":"eval","resources":{"nodes":1},"eval":{)" + source +
           R"(,"tasks":["reach"],"fp8":true}})";
  };
  const int64_t before = CountJobs();
  for (const std::string& source : {R"("checkpoint_from_job":)" + std::to_string(rl_job),
                                    R"("checkpoint":)" + std::to_string(rl_ckpt)}) {
    auto r = jobs.Submit(member_, fp8_spec(source), "");
    ASSERT_FALSE(r.ok()) << source;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << r.status().ToString();
    EXPECT_EQ(r.status().field(), "eval.fp8") << source;
    EXPECT_NE(r.status().message().find("kind rl"), std::string::npos) << r.status().ToString();
  }
  EXPECT_EQ(CountJobs(), before);
  // The rl policy without fp8, and a behaviour-cloning checkpoint with it, are evaluated.
  EXPECT_TRUE(
      jobs.Submit(member_, EvalSpec(R"("checkpoint_from_job":)" + std::to_string(rl_job)), "")
          .ok());
  for (const std::string& source : {R"("checkpoint_from_job":)" + std::to_string(bc_job),
                                    R"("checkpoint":)" + std::to_string(bc_ckpt)}) {
    auto r = jobs.Submit(member_, fp8_spec(source), "");
    EXPECT_TRUE(r.ok()) << source << ": " << r.status().ToString();
  }
}

TEST_F(EvaluationsTest, ResultsAreStoredPerTaskAndReadOnlyByTheJobsTenant) {
  auto jobs = Jobs();
  const int64_t trained = jobs.Submit(member_, Spec("bc"), "")->job.job.id;
  AddCheckpoint(trained, a_, 100);
  const int64_t ev =
      jobs.Submit(member_, EvalSpec(R"("checkpoint_from_job":)" + std::to_string(trained)), "")
          ->job.job.id;
  auto empty = jobs.Evaluation(member_, ev);
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_TRUE(empty->tasks.empty());

  const nlohmann::json event = {{"type", "eval"},
                                {"policy", "bc"},
                                {"fp8", false},
                                {"checkpoint_step", 100},
                                {"seed", 0},
                                {"tasks",
                                 {{{"task", "reach"},
                                   {"episodes", 10},
                                   {"successes", 4},
                                   {"success_rate", 0.4},
                                   {"mean_return", 0.75},
                                   {"mean_length", 33.5}},
                                  {{"task", "push"},
                                   {"episodes", 10},
                                   {"successes", 0},
                                   {"success_rate", 0.0},
                                   {"mean_return", -0.1},
                                   {"mean_length", 150.0}}}}};
  {
    auto uow = Begin();
    ASSERT_TRUE(RecordEvaluationEvent(*uow, ev, event, now_.load()).ok());
    // A training job's closing event (action MSE, no tasks) stores nothing here.
    ASSERT_TRUE(RecordEvaluationEvent(*uow, trained, {{"action_mse", 0.1}}, now_.load()).ok());
    ASSERT_TRUE(uow->Commit().ok());
  }
  auto got = jobs.Evaluation(member_, ev);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->tasks.size(), 2u);
  const auto& push = got->tasks[0];  // by task name
  EXPECT_EQ(push.task, "push");
  EXPECT_EQ(push.mean_length, 150.0);
  const auto& reach = got->tasks[1];
  EXPECT_EQ(reach.successes, 4);
  EXPECT_DOUBLE_EQ(reach.success_rate, 0.4);
  EXPECT_DOUBLE_EQ(reach.mean_return, 0.75);
  EXPECT_EQ(reach.checkpoint_step, 100);
  EXPECT_EQ(reach.policy, "bc");
  EXPECT_TRUE(jobs.Evaluation(member_, trained)->tasks.empty());
  EXPECT_EQ(jobs.Evaluation(other_, ev).status().code(), Code::kNotFound);
  const Principal viewer = AddPerson(a_, "viewer");
  EXPECT_TRUE(jobs.Evaluation(viewer, ev).ok());
}

}  // namespace
}  // namespace controlplane::service
