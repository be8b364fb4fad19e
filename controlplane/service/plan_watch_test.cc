// PlanWatch (label unit): the prediction is the planner's for the job's spec and ranks; a run of
// slow step events flags an attempt once, a fast step resets the run, resent steps do not count,
// a new attempt starts afresh; jobs the planner cannot model are never flagged. Through the node
// service: stored step events carry the server's predicted_step_seconds (a job's own is replaced),
// a slow job gets one plan_deviation event, and a job cannot write that event itself.
#include "controlplane/service/plan_watch.h"

#include <gtest/gtest.h>

#include "common/file_util.h"
#include "controlplane/testing/memory_service_fixture.h"
#include "planner/plan_request.h"

namespace controlplane::service {
namespace {

using nlohmann::json;

json ThisMachine() {
  auto text = common::ReadFile(std::string(EMBODY_SOURCE_DIR) + "/docs/plan/this-machine.json");
  EXPECT_TRUE(text.ok());
  return json::parse(*text);
}

json TrainSpec(int d_model = 64) {
  return {{"name", "t"},
          {"kind", "train"},
          {"resources", {{"nodes", 1}, {"ranks_per_node", 2}}},
          {"engine",
           {{"model", {{"d_model", d_model}, {"layers", 2}, {"heads", 4}, {"action_horizon", 8}}},
            {"data", {{"dataset", "sim:reach"}, {"tokens_per_row", 512}, {"rows_per_step", 2}}},
            {"optim", {{"steps", 100}}}}}};
}

JobRecord Job(int64_t id, const json& spec, int attempt = 0) {
  JobRecord j;
  j.id = id;
  j.kind = spec.value("kind", "train");
  j.spec = spec;
  j.attempt = attempt;
  return j;
}

std::unique_ptr<PlanWatch> Watch(double ratio = 1.5, int steps = 3) {
  auto w = PlanWatch::Make({ThisMachine(), ratio, steps});
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  return w.ok() ? std::move(*w) : nullptr;
}

TEST(PlanWatchTest, PredictsWhatThePlannerPredictsForTheSpecAndRanks) {
  auto w = Watch();
  const json body = {{"job", TrainSpec()}, {"gpus", {2}}, {"cluster", ThisMachine()}};
  auto req = planner::ParsePlanRequest(body, api::SpecLimits{});
  ASSERT_TRUE(req.ok()) << req.status().ToString();
  auto plan = planner::MakePlan(req->workload, req->cluster, req->options, req->gpus);
  ASSERT_TRUE(plan.ok());
  auto predicted = w->Predict(TrainSpec(), 2);
  ASSERT_TRUE(predicted.has_value());
  EXPECT_DOUBLE_EQ(*predicted, plan->sizes[0].step_s);
  // A wider model is slower; one rank is not the same prediction as two.
  EXPECT_GT(*w->Predict(TrainSpec(256), 2), 4 * *predicted);
  EXPECT_NE(*w->Predict(TrainSpec(), 1), *predicted);
}

TEST(PlanWatchTest, ARunOfSlowStepsFlagsTheAttemptOnce) {
  auto w = Watch(1.5, 3);
  const JobRecord job = Job(7, TrainSpec());
  const double p = *w->Predict(TrainSpec(), 2);
  // Two slow steps, then one on plan: the run starts again.
  EXPECT_FALSE(w->Observe(job, 2, 1, 2 * p).deviation);
  EXPECT_FALSE(w->Observe(job, 2, 2, 2 * p).deviation);
  EXPECT_FALSE(w->Observe(job, 2, 3, 1.2 * p).deviation);
  EXPECT_FALSE(w->Observe(job, 2, 4, 2 * p).deviation);
  EXPECT_FALSE(w->Observe(job, 2, 5, 2 * p).deviation);
  // A resent or older step does not extend the run.
  EXPECT_FALSE(w->Observe(job, 2, 5, 2 * p).deviation);
  EXPECT_FALSE(w->Observe(job, 2, 3, 2 * p).deviation);
  auto v = w->Observe(job, 2, 6, 2 * p);
  ASSERT_TRUE(v.deviation.has_value());
  EXPECT_EQ((*v.deviation)["step"], 6);
  EXPECT_DOUBLE_EQ((*v.deviation)["ratio"].get<double>(), 2.0);
  EXPECT_EQ((*v.deviation)["consecutive_steps"], 3);
  EXPECT_EQ((*v.deviation)["cluster"], "this-machine");
  EXPECT_DOUBLE_EQ(*v.predicted_step_seconds, p);
  EXPECT_EQ(w->deviations(), 1u);
  // Once per attempt.
  EXPECT_FALSE(w->Observe(job, 2, 7, 3 * p).deviation);
  EXPECT_EQ(w->deviations(), 1u);
  // The next attempt is judged afresh.
  const JobRecord next = Job(7, TrainSpec(), 1);
  for (int s = 1; s <= 2; ++s) EXPECT_FALSE(w->Observe(next, 2, s, 2 * p).deviation);
  EXPECT_TRUE(w->Observe(next, 2, 3, 2 * p).deviation);
  EXPECT_EQ(w->deviations(), 2u);
}

TEST(PlanWatchTest, AJobOnPlanIsNeverFlagged) {
  auto w = Watch(1.5, 3);
  const JobRecord job = Job(8, TrainSpec());
  const double p = *w->Predict(TrainSpec(), 2);
  for (int s = 1; s <= 100; ++s) EXPECT_FALSE(w->Observe(job, 2, s, 1.49 * p).deviation);
  EXPECT_EQ(w->deviations(), 0u);
}

TEST(PlanWatchTest, JobsThePlannerCannotModelGetNoPredictionAndNoFlag) {
  auto w = Watch(1.5, 1);
  json dataset = TrainSpec();
  dataset["engine"]["data"]["dataset"] = "dataset:mine";  // no sample length to plan with
  json command = {{"name", "c"}, {"kind", "command"}, {"command", {"true"}}};
  for (const json& spec : {dataset, command}) {
    auto v = w->Observe(Job(9, spec), 2, 1, 1e6);
    EXPECT_FALSE(v.predicted_step_seconds) << spec.dump();
    EXPECT_FALSE(v.deviation);
  }
  // No step time in the event: nothing to judge.
  EXPECT_FALSE(w->Observe(Job(10, TrainSpec()), 2, 1, std::nullopt).deviation);
}

TEST(PlanWatchTest, ABadClusterOrThresholdIsRefused) {
  json cluster = ThisMachine();
  cluster["compute"]["flops_per_s"] = -1;
  auto bad = PlanWatch::Make({cluster, 1.5, 3});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().field(), "cluster.compute.flops_per_s");
  EXPECT_FALSE(PlanWatch::Make({ThisMachine(), 1.0, 3}).ok());
  EXPECT_FALSE(PlanWatch::Make({ThisMachine(), 1.5, 0}).ok());
}

class PlanWatchNodeTest : public testing::NodeServiceFixture {
 protected:
  void SetUp() override {
    NodeServiceFixture::SetUp();
    watch_ = Watch(1.5, 3);
    SetUpNodeService(1000, {.plan_watch = watch_.get()});
  }

  // A train job of 2 ranks placed on `node` (SCHEDULED, its head there).
  int64_t PlacedTrainJob(int64_t node) { return PlacedJob(member_, node, TrainSpec().dump(), 2); }

  // A heartbeat of `job` running, with its steps 1..n each taking `step_seconds`.
  static api::HeartbeatRequest Steps(int64_t job, int n, double step_seconds) {
    api::HeartbeatRequest hb;
    hb.running = {job};
    for (int s = 1; s <= n; ++s) {
      hb.events.push_back(
          {job, 0, "step", {{"type", "step"}, {"step", s}, {"step_seconds", step_seconds}}});
    }
    return hb;
  }

  std::unique_ptr<PlanWatch> watch_;
};

TEST_F(PlanWatchNodeTest, StepEventsCarryThePlanAndASlowJobIsFlaggedOnce) {
  int64_t n1 = 0;
  const Principal cred = AddNode(*nodes_, join_, "n1", 2, &n1);
  const int64_t job = PlacedTrainJob(n1);
  const double p = *watch_->Predict(JobRow(job).spec, 2);
  api::HeartbeatRequest hb = Steps(job, 5, 3 * p);
  // The job claims a prediction of its own, and forges the server's verdict.
  for (api::JobEventReport& e : hb.events) e.data["predicted_step_seconds"] = 100.0;
  hb.events.push_back({job, 0, "plan_deviation", {{"type", "plan_deviation"}, {"step", 1}}});
  now_ += 500;
  ASSERT_TRUE(nodes_->Heartbeat(cred, n1, hb).ok());
  const auto steps = EventsOf(job, "step");
  ASSERT_FALSE(steps.empty());
  for (const EventRecord& e : steps) {
    EXPECT_DOUBLE_EQ(e.data.at("predicted_step_seconds").get<double>(), p) << e.data.dump();
  }
  const auto flagged = EventsOf(job, "plan_deviation");
  ASSERT_EQ(flagged.size(), 1u);
  EXPECT_EQ(flagged[0].data.at("step"), 3);  // the server's, at the third slow step
  EXPECT_DOUBLE_EQ(flagged[0].data.at("ratio").get<double>(), 3.0);
  EXPECT_EQ(nodes_->EventsDropped().at("reserved_type"), 1u);
  EXPECT_EQ(watch_->deviations(), 1u);
}

TEST_F(PlanWatchNodeTest, AJobOnPlanGetsThePredictionAndNoFlag) {
  int64_t n1 = 0;
  const Principal cred = AddNode(*nodes_, join_, "n1", 2, &n1);
  const int64_t job = PlacedTrainJob(n1);
  const double p = *watch_->Predict(JobRow(job).spec, 2);
  const api::HeartbeatRequest hb = Steps(job, 10, 1.1 * p);
  now_ += 500;
  ASSERT_TRUE(nodes_->Heartbeat(cred, n1, hb).ok());
  EXPECT_TRUE(EventsOf(job, "plan_deviation").empty());
  EXPECT_DOUBLE_EQ(EventsOf(job, "step").back().data.at("predicted_step_seconds").get<double>(), p);
}

}  // namespace
}  // namespace controlplane::service
