// Pipelines on the in-memory twin (label unit): what a submit refuses (storing nothing), and the
// driver's passes over a pipeline whose jobs the test ends by hand: one job per attempt however
// often it runs (a crash between a job's commit and its recording included), references
// resolved to the tenant's own artifacts, retries, gates that record what they compared,
// cancel cascading to the jobs, and another tenant finding nothing.
#include "controlplane/service/pipelines_service.h"

#include <gtest/gtest.h>

#include "common/time_util.h"
#include "controlplane/service/checkpoint_index.h"
#include "controlplane/service/forecast_service.h"
#include "controlplane/testing/memory_service_fixture.h"

namespace controlplane::service {
namespace {

using common::Code;
using nlohmann::json;

// A view as the API writes it: these tests check the fields of the wire.
template <typename View>
Result<json> Wire(const Result<View>& v) {
  if (!v.ok()) return v.status();
  return api::v1::ToJson(*v);
}

json CommandJob() {
  return {{"kind", "command"}, {"command", {"true"}}, {"resources", {{"nodes", 1}}}};
}

json TrainJob() {
  return {{"kind", "train"},
          {"resources", {{"nodes", 1}}},
          {"engine", {{"optim", {{"steps", 10}}}}}};
}

json EvalJob(const std::string& from) {
  return {{"kind", "eval"},
          {"resources", {{"nodes", 1}}},
          {"eval", {{"checkpoint_from_step", from}, {"tasks", {"reach"}}, {"episodes", 10}}}};
}

// train -> eval, train -> eval2, a gate: eval2 at least eval minus 0.03.
json GatedPipeline() {
  return {{"name", "gated"},
          {"steps",
           {{{"name", "train"}, {"job", TrainJob()}},
            {{"name", "eval"}, {"needs", {"train"}}, {"job", EvalJob("train")}},
            {{"name", "eval2"}, {"needs", {"train"}}, {"job", EvalJob("train")}},
            {{"name", "gate"},
             {"needs", {"eval", "eval2"}},
             {"when",
              {{"step", "eval2"},
               {"metric", "success_rate"},
               {"at_least", {{"step", "eval"}, {"metric", "success_rate"}, {"minus", 0.03}}}}}}}}};
}

class PipelinesServiceTest : public testing::TwoTenantServiceTest {
 protected:
  void SetUp() override {
    TwoTenantServiceTest::SetUp();
    jobs_ = std::make_unique<JobsService>(Jobs());
    PipelinesOptions o;
    o.dataset_root = data_dir_ + "/datasets";
    pipelines_ = std::make_unique<PipelinesService>(db_, *jobs_, o, clock(), nullptr);
  }

  int64_t SubmitOk(const json& spec, const Principal& who) {
    auto r = Wire(pipelines_->Submit(who, spec.dump()));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? (*r)["id"].get<int64_t>() : 0;
  }

  json Show(int64_t id) {
    auto r = Wire(pipelines_->Get(member_, id));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : json::object();
  }

  json StepOf(int64_t id, const std::string& name) {
    const json p = Show(id);
    for (const json& s : p["steps"]) {
      if (s["name"] == name) return s;
    }
    ADD_FAILURE() << "no step " << name;
    return json::object();
  }

  void Drive() { ASSERT_TRUE(pipelines_->Drive().ok()); }

  // Ends job `id` as its agent's report would (the test plays scheduler and agent).
  void End(int64_t id, api::JobState state, const std::string& reason = "") {
    auto uow = Begin();
    JobRecord j = **uow->jobs().Get(id, std::nullopt, true);
    j.state = state;
    j.reason = reason;
    j.finished_ms = now_.load();
    ASSERT_TRUE(uow->jobs().Update(j).ok());
    ASSERT_TRUE(uow->Commit().ok());
  }

  int64_t AddReadyCheckpoint(int64_t job, int64_t tenant) {
    auto uow = Begin();
    CheckpointBlob c;
    c.job_id = job;
    c.tenant_id = tenant;
    c.step = 10;
    c.bytes = 10;
    c.sha256 = std::string(64, 'a');
    c.state = "uploading";
    auto id = uow->checkpoints().InsertUpload(c, now_.load());
    EXPECT_TRUE(id.ok());
    EXPECT_TRUE(uow->checkpoints().MarkReady(*id, now_.load()).ok());
    EXPECT_TRUE(uow->Commit().ok());
    return *id;
  }

  void AddResult(int64_t job, int episodes, int successes) {
    auto uow = Begin();
    EvaluationRecord r;
    r.task = "reach";
    r.episodes = episodes;
    r.successes = successes;
    r.success_rate = static_cast<double>(successes) / episodes;
    r.policy = "bc";
    ASSERT_TRUE(uow->events().PutEvaluation(job, r).ok());
    ASSERT_TRUE(uow->Commit().ok());
  }

  int64_t JobOf(int64_t id, const std::string& step) {
    const json s = StepOf(id, step);
    return s["job_id"].is_null() ? 0 : s["job_id"].get<int64_t>();
  }

  // Runs the gated pipeline to its gate with these results; returns the pipeline id.
  int64_t RunGated(int eval_successes, int eval2_successes) {
    const int64_t id = SubmitOk(GatedPipeline(), member_);
    Drive();
    const int64_t train = JobOf(id, "train");
    EXPECT_GT(train, 0);
    End(train, api::JobState::kSucceeded);
    AddReadyCheckpoint(train, a_);
    Drive();
    const int64_t ev = JobOf(id, "eval"), ev2 = JobOf(id, "eval2");
    EXPECT_GT(ev, 0);
    EXPECT_GT(ev2, 0);
    AddResult(ev, 100, eval_successes);
    AddResult(ev2, 100, eval2_successes);
    End(ev, api::JobState::kSucceeded);
    End(ev2, api::JobState::kSucceeded);
    Drive();
    return id;
  }

  std::unique_ptr<JobsService> jobs_;
  std::unique_ptr<PipelinesService> pipelines_;
};

TEST_F(PipelinesServiceTest, RefusalsStoreNothing) {
  const Principal viewer = AddPerson(a_, "viewer");
  EXPECT_EQ(Wire(pipelines_->Submit(viewer, GatedPipeline().dump())).status().code(),
            Code::kPermissionDenied);
  json bad = GatedPipeline();
  bad["steps"][1]["needs"] = json::array();  // eval reads train's checkpoint without needing it
  auto r = Wire(pipelines_->Submit(member_, bad.dump()));
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(r.status().field(), "steps[1].job.eval.checkpoint_from_step");
  // The tenant's own limits apply to each step's job as POST /v1/jobs applies them.
  bad = GatedPipeline();
  bad["steps"][0]["job"]["resources"]["nodes"] = 5;
  r = Wire(pipelines_->Submit(member_, bad.dump()));
  EXPECT_EQ(r.status().code(), Code::kUnprocessable) << r.status().ToString();
  EXPECT_EQ(r.status().field().rfind("steps[0].job.resources", 0), 0u) << r.status().ToString();
  bad = GatedPipeline();
  bad["steps"][0]["job"]["priority"] = 101;
  EXPECT_EQ(Wire(pipelines_->Submit(member_, bad.dump())).status().code(), Code::kInvalidArgument);
  auto list = Wire(pipelines_->List(member_, 50, ""));
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE((*list)["pipelines"].empty());
  EXPECT_EQ(CountJobs(), 0);
}

// A dry run stores nothing and is refused as the submit would be; each step's job gets the
// forecast a job's dry run gives, and the DAG's times follow from it: a step starts when its
// needs are expected to end (plus its job's wait now) and runs its predicted time; after an
// import, nothing is predicted.
TEST_F(PipelinesServiceTest, ADryRunForecastsEachStepDownTheDagAndStoresNothing) {
  ParkNode("up", 2, /*draining=*/false);
  ForecastService forecasts(db_, api::SpecLimits{}, clock(), ForecastServiceOptions{});
  json spec = GatedPipeline();
  spec["steps"][0]["job"]["time_limit_seconds"] = 600;
  spec["steps"][1]["job"]["time_limit_seconds"] = 120;
  spec["steps"][2]["job"]["time_limit_seconds"] = 60;
  auto r = Wire(pipelines_->DryRun(member_, spec.dump(), forecasts));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const int64_t now = now_.load();
  auto at = [&](int64_t seconds) { return common::FormatTimeMillis(now + seconds * 1000); };
  EXPECT_EQ((*r)["dry_run"], true);
  EXPECT_EQ((*r)["admitted"], true);
  const json& steps = (*r)["steps"];
  ASSERT_EQ(steps.size(), 4u);
  EXPECT_EQ(steps[0]["name"], "train");
  EXPECT_EQ(steps[0]["forecast"]["starts_now"], true);
  EXPECT_EQ(steps[0]["forecast"]["run_time_source"], "time_limit");
  EXPECT_EQ(steps[0]["predicted_start"], at(0));
  EXPECT_EQ(steps[0]["predicted_end"], at(600));
  EXPECT_EQ(steps[1]["predicted_start"], at(600));
  EXPECT_EQ(steps[1]["predicted_end"], at(720));
  EXPECT_EQ(steps[2]["predicted_end"], at(660));
  EXPECT_EQ(steps[3]["kind"], "gate");
  EXPECT_EQ(steps[3]["predicted_start"], at(720));
  EXPECT_EQ(steps[3]["predicted_end"], at(720));
  EXPECT_EQ((*r)["predicted_end"], at(720));
  // A job ahead of it holding both slots: the first step waits as a job of its shape would now,
  // and the steps after it move by as much.
  auto ahead = jobs_->Submit(member_,
                             R"({"name":"ahead","kind":"command","command":["true"],"time_limit_seconds":300,)"
                             R"("resources":{"nodes":1,"ranks_per_node":2}})",
                             "");
  ASSERT_TRUE(ahead.ok()) << ahead.status().ToString();
  r = Wire(pipelines_->DryRun(member_, spec.dump(), forecasts));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const json& queued = (*r)["steps"];
  ASSERT_TRUE(queued[0]["forecast"]["predicted_wait_seconds"].is_number()) << queued[0];
  const double wait = queued[0]["forecast"]["predicted_wait_seconds"].get<double>();
  EXPECT_GE(wait, 300.0);
  EXPECT_EQ(queued[0]["predicted_start"],
            common::FormatTimeMillis(now + static_cast<int64_t>(wait * 1000.0)));
  EXPECT_EQ(queued[1]["predicted_start"],
            common::FormatTimeMillis(now + static_cast<int64_t>(wait * 1000.0) + 600'000 +
                                     static_cast<int64_t>(
                                         queued[1]["forecast"]["predicted_wait_seconds"]
                                             .get<double>() * 1000.0)));
  // Refused exactly as a submit, and nothing stored either way.
  json bad = GatedPipeline();
  bad["steps"][1]["needs"] = json::array();
  auto refused = Wire(pipelines_->DryRun(member_, bad.dump(), forecasts));
  EXPECT_EQ(refused.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(refused.status().field(),
            Wire(pipelines_->Submit(member_, bad.dump())).status().field());
  const Principal viewer = AddPerson(a_, "viewer");
  EXPECT_EQ(Wire(pipelines_->DryRun(viewer, spec.dump(), forecasts)).status().code(),
            Code::kPermissionDenied);
  // After an import: its run time, and so every step after it, is not predicted.
  json imported = {{"name", "from-import"},
                   {"steps",
                    {{{"name", "import"},
                      {"import", {{"name", "demos"}, {"source", {{"path", "/data/demos.hdf5"}}}}}},
                     {{"name", "after"}, {"needs", {"import"}}, {"job", CommandJob()}}}}};
  auto ri = Wire(pipelines_->DryRun(member_, imported.dump(), forecasts));
  ASSERT_TRUE(ri.ok()) << ri.status().ToString();
  EXPECT_EQ((*ri)["steps"][0]["predicted_start"], at(0));
  EXPECT_TRUE((*ri)["steps"][0]["predicted_end"].is_null());
  EXPECT_EQ((*ri)["steps"][0]["not_predicted"], "an import's run time is not predicted");
  EXPECT_TRUE((*ri)["steps"][1]["predicted_start"].is_null());
  EXPECT_EQ((*ri)["steps"][1]["not_predicted"],
            "after step import, whose end is not predicted");
  EXPECT_TRUE((*ri)["predicted_end"].is_null());
  auto list = Wire(pipelines_->List(member_, 50, ""));
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE((*list)["pipelines"].empty());
  EXPECT_EQ(CountJobs(), 1);  // the one submitted above, no step's
}

TEST_F(PipelinesServiceTest, AnotherTenantFindsNothing) {
  const int64_t id = SubmitOk(GatedPipeline(), member_);
  Drive();
  // Its steps cannot name a's job or checkpoint either: not found, as for ids never made.
  const int64_t train = JobOf(id, "train");
  const int64_t ckpt = AddReadyCheckpoint(train, a_);
  json steal = {{"name", "steal"},
                {"steps", {{{"name", "e"}, {"job", EvalJob("x")}}}}};
  steal["steps"][0]["job"]["eval"].erase("checkpoint_from_step");
  steal["steps"][0]["job"]["eval"]["checkpoint_from_job"] = train;
  auto r = Wire(pipelines_->Submit(other_, steal.dump()));
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_EQ(r.status().field(), "steps[0].job.eval.checkpoint_from_job");
  steal["steps"][0]["job"]["eval"].erase("checkpoint_from_job");
  steal["steps"][0]["job"]["eval"]["checkpoint"] = ckpt;
  r = Wire(pipelines_->Submit(other_, steal.dump()));
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_EQ(r.status().field(), "steps[0].job.eval.checkpoint");
  steal["steps"][0]["job"] = TrainJob();
  steal["steps"][0]["job"]["init_from"] = ckpt;
  EXPECT_EQ(Wire(pipelines_->Submit(other_, steal.dump())).status().code(), Code::kNotFound);
  EXPECT_EQ(Wire(pipelines_->Get(other_, id)).status().code(), Code::kNotFound);
  EXPECT_EQ(Wire(pipelines_->Cancel(other_, id)).status().code(), Code::kNotFound);
  EXPECT_TRUE((*Wire(pipelines_->List(other_, 50, "")))["pipelines"].empty());
  EXPECT_EQ((*Wire(pipelines_->List(member_, 50, "")))["pipelines"].size(), 1u);
  EXPECT_EQ(Show(id)["state"], "running");
  EXPECT_EQ(CountJobs(), 1);
}

TEST_F(PipelinesServiceTest, EachStepIsSubmittedOnceAsItsOwnerWithItsReferencesResolved) {
  const int64_t id = SubmitOk(GatedPipeline(), member_);
  Drive();
  Drive();  // a second pass submits nothing more
  EXPECT_EQ(CountJobs(), 1);
  const int64_t train = JobOf(id, "train");
  const JobRecord row = JobRow(train);
  EXPECT_EQ(row.tenant_id, a_);
  EXPECT_EQ(row.token_id, member_.token_id);
  EXPECT_EQ(row.name, "gated.train");
  EXPECT_EQ(StepOf(id, "eval")["state"], "pending");
  // The job's own view names its pipeline and step; another tenant does not find the job.
  auto view = jobs_->Get(member_, train);
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  ASSERT_TRUE(view->pipeline.has_value());
  EXPECT_EQ(*view->pipeline, json({{"id", id}, {"name", "gated"}, {"step", "train"}, {"attempt", 1}}));
  EXPECT_EQ(jobs_->Get(other_, train).status().code(), Code::kNotFound);

  // Succeeded, but its checkpoint not uploaded yet: the evals wait, saying why.
  End(train, api::JobState::kSucceeded);
  Drive();
  EXPECT_EQ(StepOf(id, "train")["state"], "succeeded");
  EXPECT_EQ(CountJobs(), 1);
  EXPECT_NE(StepOf(id, "eval")["reason"].get<std::string>().find("waiting for a ready checkpoint"),
            std::string::npos);
  const int64_t ckpt = AddReadyCheckpoint(train, a_);
  Drive();
  EXPECT_EQ(CountJobs(), 3);
  const JobRecord ev = JobRow(JobOf(id, "eval"));
  EXPECT_EQ(ev.spec["eval"]["checkpoint"], ckpt);  // resolved, then through the eval rules
  EXPECT_EQ(ev.spec["init_from"], ckpt);
}

TEST_F(PipelinesServiceTest, ASubmissionRetriedAfterACrashFindsItsJob) {
  const int64_t id = SubmitOk(GatedPipeline(), member_);
  Drive();
  const int64_t train = JobOf(id, "train");
  ASSERT_GT(train, 0);
  {
    // As if the server died after the job's COMMIT and before the step recorded it.
    auto uow = Begin();
    PipelineRecord p = **uow->pipelines().Get(id, std::nullopt, true);
    p.steps[0].submitting = p.spec["steps"][0]["job"];
    p.steps[0].jobs.clear();
    p.steps[0].state = kStepPending;
    ASSERT_TRUE(uow->pipelines().Update(p, now_.load()).ok());
    ASSERT_TRUE(uow->Commit().ok());
  }
  Drive();
  EXPECT_EQ(CountJobs(), 1);
  EXPECT_EQ(JobOf(id, "train"), train);
  EXPECT_EQ(StepOf(id, "train")["state"], "running");
}

TEST_F(PipelinesServiceTest, AFailedStepIsRetriedThenItsDependentsRun) {
  json spec = {{"name", "retry"},
               {"steps",
                {{{"name", "flaky"}, {"retries", 1}, {"job", CommandJob()}},
                 {{"name", "after"}, {"needs", {"flaky"}}, {"job", CommandJob()}}}}};
  const int64_t id = SubmitOk(spec, member_);
  Drive();
  const int64_t first = JobOf(id, "flaky");
  End(first, api::JobState::kFailed, "exit status 1");
  Drive();
  const json flaky = StepOf(id, "flaky");
  EXPECT_EQ(flaky["attempts"], 2);
  EXPECT_EQ(flaky["state"], "running");
  const int64_t second = flaky["job_id"];
  EXPECT_NE(second, first);
  End(second, api::JobState::kSucceeded);
  Drive();
  const int64_t after = JobOf(id, "after");
  ASSERT_GT(after, 0);
  End(after, api::JobState::kSucceeded);
  Drive();
  EXPECT_EQ(Show(id)["state"], "succeeded");
  EXPECT_EQ(CountJobs(), 3);
}

TEST_F(PipelinesServiceTest, AStepOutOfRetriesFailsThePipelineAndSkipsItsDependents) {
  json spec = {{"name", "fails"},
               {"steps",
                {{{"name", "bad"}, {"job", CommandJob()}},
                 {{"name", "after"}, {"needs", {"bad"}}, {"job", CommandJob()}},
                 {{"name", "apart"}, {"job", CommandJob()}}}}};
  const int64_t id = SubmitOk(spec, member_);
  Drive();
  End(JobOf(id, "bad"), api::JobState::kFailed, "exit status 3");
  Drive();
  EXPECT_EQ(StepOf(id, "bad")["state"], "failed");
  EXPECT_EQ(StepOf(id, "after")["state"], "skipped");
  EXPECT_EQ(Show(id)["state"], "running");  // "apart" still runs
  End(JobOf(id, "apart"), api::JobState::kSucceeded);
  Drive();
  const json p = Show(id);
  EXPECT_EQ(p["state"], "failed");
  EXPECT_NE(p["reason"].get<std::string>().find("exit status 3"), std::string::npos);
}

TEST_F(PipelinesServiceTest, APassingGateRecordsWhatItCompared) {
  const int64_t id = RunGated(60, 58);
  const json gate = StepOf(id, "gate");
  EXPECT_EQ(gate["state"], "succeeded");
  EXPECT_DOUBLE_EQ(gate["gate"]["value"].get<double>(), 0.58);
  EXPECT_DOUBLE_EQ(gate["gate"]["reference"]["value"].get<double>(), 0.60);
  EXPECT_NEAR(gate["gate"]["threshold"].get<double>(), 0.57, 1e-12);
  EXPECT_EQ(gate["gate"]["passed"], true);
  EXPECT_EQ(Show(id)["state"], "succeeded");
}

TEST_F(PipelinesServiceTest, AFailedGateSaysWhichValuesItCompared) {
  const int64_t id = RunGated(60, 50);
  const json gate = StepOf(id, "gate");
  EXPECT_EQ(gate["state"], "gate_failed");
  EXPECT_DOUBLE_EQ(gate["gate"]["value"].get<double>(), 0.50);
  EXPECT_NEAR(gate["gate"]["threshold"].get<double>(), 0.57, 1e-12);
  EXPECT_EQ(gate["gate"]["passed"], false);
  EXPECT_NE(gate["reason"].get<std::string>().find("0.5000 is below the threshold 0.5700"),
            std::string::npos)
      << gate.dump();
  EXPECT_EQ(Show(id)["state"], "failed");
}

TEST_F(PipelinesServiceTest, CancelCascadesToRunningJobsAndPendingSteps) {
  json spec = {{"name", "cancel"},
               {"steps",
                {{{"name", "a"}, {"job", CommandJob()}},
                 {{"name", "b"}, {"job", CommandJob()}},
                 {{"name", "c"}, {"needs", {"a"}}, {"job", CommandJob()}}}}};
  const int64_t id = SubmitOk(spec, member_);
  Drive();
  const int64_t a = JobOf(id, "a"), b = JobOf(id, "b");
  {
    // Job a is running on a node; b is still pending.
    auto uow = Begin();
    JobRecord j = **uow->jobs().Get(a, std::nullopt, true);
    j.state = api::JobState::kRunning;
    ASSERT_TRUE(uow->jobs().Update(j).ok());
    ASSERT_TRUE(uow->Commit().ok());
  }
  auto r = Wire(pipelines_->Cancel(member_, id));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["state"], "cancelling");
  EXPECT_EQ(JobRow(a).state, api::JobState::kCancelling);
  EXPECT_EQ(JobRow(b).state, api::JobState::kCancelled);
  for (const json& s : (*r)["steps"]) EXPECT_EQ(s["state"], "cancelled") << s.dump();
  End(a, api::JobState::kCancelled);
  Drive();
  EXPECT_EQ(Show(id)["state"], "cancelled");
  EXPECT_EQ(CountJobs(), 2);  // c never ran
  EXPECT_EQ(Wire(pipelines_->Cancel(member_, id)).status().code(), Code::kFailedPrecondition);
}

TEST_F(PipelinesServiceTest, ARevokedOwnerStopsTheNextSubmission) {
  const Principal owner = AddPerson(a_, "member");
  json spec = {{"name", "owned"}, {"steps", {{{"name", "a"}, {"job", CommandJob()}}}}};
  const int64_t id = SubmitOk(spec, owner);
  {
    auto uow = Begin();
    ASSERT_TRUE(uow->tenants().RevokeToken(owner.token_id, now_.load()).ok());
    ASSERT_TRUE(uow->Commit().ok());
  }
  Drive();
  EXPECT_EQ(CountJobs(), 0);
  EXPECT_EQ(StepOf(id, "a")["state"], "failed");
  EXPECT_NE(StepOf(id, "a")["reason"].get<std::string>().find("revoked"), std::string::npos);
}

}  // namespace
}  // namespace controlplane::service
