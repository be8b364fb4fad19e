#include "api/v1/evaluation.h"

#include <gtest/gtest.h>

namespace api::v1 {
namespace {

using nlohmann::json;

EvaluationTask Reach() {
  EvaluationTask t;
  t.task = "reach";
  t.episodes = 10;
  t.successes = 4;
  t.success_rate = 0.4;
  t.mean_return = 0.75;
  t.mean_length = 150;
  t.checkpoint_step = 100;
  t.policy = "bc";
  t.evaluated_ms = 1'767'322'800'000;
  return t;
}

TEST(EvaluationViewTest, WritesEveryField) {
  EXPECT_EQ(ToJson(Evaluation{9, {Reach()}}).dump(),
            R"({"job_id":9,"tasks":[{"checkpoint_step":100,"episodes":10,)"
            R"("evaluated_at":"2026-01-02T03:00:00.000Z","fp8":false,"mean_length":150.0,)"
            R"("mean_return":0.75,"policy":"bc","success_rate":0.4,"successes":4,)"
            R"("task":"reach"}]})");
  EXPECT_EQ(ToJson(Evaluation{9, {}}).dump(), R"({"job_id":9,"tasks":[]})");
}

TEST(EvaluationViewTest, RoundTrips) {
  EvaluationTask push = Reach();
  push.task = "push";
  push.policy = "rl";
  push.fp8 = true;
  push.success_rate = 1;
  const Evaluation e{9, {push, Reach()}};
  auto back = ParseEvaluation(ToJson(e));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, e);
}

TEST(EvaluationViewTest, MissingOrWrongFieldsAreRefusedWithTheirPath) {
  json j = ToJson(Evaluation{9, {Reach(), Reach()}});
  j["tasks"][1].erase("fp8");
  auto r = ParseEvaluation(j);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), common::Code::kInvalidArgument);
  EXPECT_EQ(r.status().field(), "tasks[1].fp8");
  EXPECT_EQ(r.status().message(), "is required");
  j = ToJson(Evaluation{9, {Reach()}});
  j["tasks"][0]["episodes"] = 10.5;
  EXPECT_EQ(ParseEvaluation(j).status().field(), "tasks[0].episodes");
  j = ToJson(Evaluation{9, {Reach()}});
  j["tasks"][0]["evaluated_at"] = "yesterday";
  EXPECT_EQ(ParseEvaluation(j).status().field(), "tasks[0].evaluated_at");
  EXPECT_EQ(ParseEvaluation(json{{"job_id", 9}}).status().field(), "tasks");
  EXPECT_EQ(ParseEvaluation(json::array()).status().field(), "response");
}

}  // namespace
}  // namespace api::v1
