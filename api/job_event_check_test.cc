// The rules of a job event (api/job_event_check.h): what the agent refuses at its local API and
// what the server drops from a heartbeat, each with its reason.
#include "api/job_event_check.h"

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace api {
namespace {

using nlohmann::json;

std::string ReasonOf(const json& event) {
  const std::string type = event.is_object() && event.contains("type") && event["type"].is_string()
                               ? event["type"].get<std::string>()
                               : "";
  auto bad = CheckJobEvent(type, event);
  return bad ? bad->reason : "ok";
}

TEST(JobEventCheckTest, TheEnginesEventsPass) {
  EXPECT_EQ(ReasonOf({{"type", "step"}, {"step", 3}, {"steps", 10}, {"loss", 0.5},
                      {"grad_norm", nullptr}, {"custom", "text"}}),
            "ok");
  EXPECT_EQ(ReasonOf({{"type", "checkpoint"}, {"step", 3}, {"path", "/c/step-3.ckpt"},
                      {"bytes", 9}, {"metrics", {{"loss", 0.5}}}}),
            "ok");
  EXPECT_EQ(ReasonOf({{"type", "eval"}, {"step", 10}, {"samples", 4}, {"euler_steps", 8},
                      {"action_mse", 0.1}, {"zero_action_mse", 0.9}}),
            "ok");
  EXPECT_EQ(ReasonOf({{"type", "dataset"}, {"error", "no such file"}}), "ok");
  // engine.fp8.allreduce: wire bytes and the FP8 statistics, as Fp8StatsJson writes them.
  EXPECT_EQ(ReasonOf({{"type", "step"},
                      {"step", 4},
                      {"grad_wire_bytes", 1056768},
                      {"grad_wire_bytes_fp32", 4194304},
                      {"fp8_allreduce",
                       {{"elements", 1572864}, {"amax", 0.75}, {"scale_min", 1.2e-38},
                        {"scale_max", 0.0017}, {"saturated", 0}, {"underflowed", 12},
                        {"nan", 0}}}}),
            "ok");
  EXPECT_EQ(ReasonOf({{"type", "my.tool/progress-2"}, {"anything", {1, "two", nullptr}}}), "ok");
}

TEST(JobEventCheckTest, RlStepEventsAreTypedAndBounded) {
  const json rl = {{"type", "step"},         {"step", 4},          {"steps", 40},
                   {"env_steps", 2048},      {"episodes", 31},     {"env_steps_per_s", 9000.5},
                   {"mean_return", -0.25},   {"success_rate", 0.5}, {"policy_loss", -0.01},
                   {"value_loss", 0.03},     {"entropy", 2.7},     {"approx_kl", 0.02},
                   {"clip_fraction", 0.12},  {"rollout_seconds", 0.1},
                   {"update_seconds", 0.2}};
  EXPECT_EQ(ReasonOf(rl), "ok");
  json none = rl;
  none["success_rate"] = nullptr;  // no episode ended in the rollout
  none["mean_return"] = nullptr;
  EXPECT_EQ(ReasonOf(none), "ok");
  json async = rl;  // an asynchronous run's extra fields (docs/rl.md)
  async.update({{"trajectories_per_s", 70.5},
                {"staleness", {{"0", 100}, {"1", 412}}},
                {"staleness_mean", 0.8},
                {"staleness_max", 1},
                {"queue_depth", 3},
                {"actor_idle_share", 0.1},
                {"learner_idle_share", 0.6},
                {"inference_batch", 5.5},
                {"importance_capped", 0.05}});
  EXPECT_EQ(ReasonOf(async), "ok");
  for (auto [key, value] : std::vector<std::pair<std::string, json>>{
           {"success_rate", 1.5},
           {"success_rate", -0.1},
           {"clip_fraction", 2},
           {"env_steps", -5},
           {"env_steps", 1.5},
           {"episodes", "many"},
           {"approx_kl", "small"},
           {"entropy", json::array()},
           {"staleness", 3},
           {"staleness", json{{"0", "all"}}},
           {"staleness_max", -1},
           {"queue_depth", 0.5},
           {"actor_idle_share", 1.5},
           {"learner_idle_share", -0.2},
           {"importance_capped", 1.2}}) {
    json bad = rl;
    bad[key] = value;
    EXPECT_EQ(ReasonOf(bad), "bad_field") << key << " = " << value.dump();
  }
}

TEST(JobEventCheckTest, EvalResultsAreTypedAndBounded) {
  const json task = {{"task", "reach"},      {"episodes", 20},       {"successes", 9},
                     {"success_rate", 0.45}, {"mean_return", 0.8}, {"mean_length", 31.5}};
  const json ev = {{"type", "eval"},   {"policy", "bc"}, {"fp8", false},
                   {"checkpoint_step", 600}, {"seed", 0}, {"tasks", {task}}};
  EXPECT_EQ(ReasonOf(ev), "ok");
  // Step events of a run that evaluates every K steps.
  EXPECT_EQ(ReasonOf({{"type", "step"}, {"step", 30}, {"eval_success_rate", 0.25},
                      {"eval_mean_return", 0.1}, {"eval_episodes", 16}}),
            "ok");
  EXPECT_EQ(ReasonOf({{"type", "step"}, {"step", 30}, {"eval_success_rate", 1.25}}), "bad_field");
  auto with_task = [&](const std::string& key, const json& value) {
    json t = task;
    if (value.is_discarded()) {
      t.erase(key);
    } else {
      t[key] = value;
    }
    json e = ev;
    e["tasks"] = {t};
    return e;
  };
  for (auto [key, value] : std::vector<std::pair<std::string, json>>{
           {"task", "stack"},
           {"task", 3},
           {"episodes", 0},
           {"episodes", 100000},
           {"episodes", 2.5},
           {"successes", 21},  // more than the episodes
           {"successes", -1},
           {"success_rate", 1.5},
           {"success_rate", "half"},
           {"mean_return", nullptr},
           {"mean_length", -1},
           {"extra", 1},
           {"mean_length", json(json::value_t::discarded)}}) {
    EXPECT_EQ(ReasonOf(with_task(key, value)), "bad_field") << key << " = " << value.dump();
  }
  json twice = ev;
  twice["tasks"] = {task, task};
  EXPECT_EQ(ReasonOf(twice), "bad_field");
  json many = ev;
  many["tasks"] = json::array();
  EXPECT_EQ(ReasonOf(many), "bad_field");
  json fp8 = ev;
  fp8["fp8"] = "yes";
  EXPECT_EQ(ReasonOf(fp8), "bad_field");
}

TEST(JobEventCheckTest, NulAndBrokenUtf8AreRefusedAnywhere) {
  const std::string nul("a\0b", 3);
  EXPECT_EQ(ReasonOf({{"type", "note"}, {"text", nul}}), "bad_text");
  EXPECT_EQ(ReasonOf({{"type", "note"}, {"deep", {{"list", {1, nul}}}}}), "bad_text");
  EXPECT_EQ(ReasonOf({{"type", "note"}, {nul, 1}}), "bad_text");
  // nlohmann parses the escape into a real NUL byte: what a job sends on the wire.
  EXPECT_EQ(ReasonOf(json::parse(R"({"type":"step","step":1,"note":"x\u0000y"})")), "bad_text");
  auto bad = CheckJobEvent("note", {{"type", "note"}, {"a", {{"b", nul}}}});
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->field, "a.b");
  EXPECT_FALSE(IsStorableText("\xC0\x80"));          // overlong NUL
  EXPECT_FALSE(IsStorableText("\xED\xA0\x80"));      // a surrogate
  EXPECT_FALSE(IsStorableText("\xF4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(IsStorableText("\xE2\x82"));          // cut short
  EXPECT_TRUE(IsStorableText("h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80"));
}

TEST(JobEventCheckTest, WrongTypesOfKnownFieldsAreRefused) {
  EXPECT_EQ(ReasonOf({{"type", "step"}, {"step", "three"}}), "bad_field");
  EXPECT_EQ(ReasonOf({{"type", "step"}, {"step", -1}}), "bad_field");
  EXPECT_EQ(ReasonOf({{"type", "step"}, {"loss", "low"}}), "bad_field");
  EXPECT_EQ(ReasonOf({{"type", "checkpoint"}, {"step", 3}, {"path", "/c"}, {"bytes", "9"}}),
            "bad_field");
  EXPECT_EQ(ReasonOf({{"type", "checkpoint"}, {"step", 3.5}, {"path", "/c"}}), "bad_field");
  EXPECT_EQ(ReasonOf({{"type", "checkpoint"}, {"step", 3}}), "bad_field");
  EXPECT_EQ(ReasonOf({{"type", "checkpoint"}, {"step", 3}, {"path", "/c"}, {"metrics", {1}}}),
            "bad_field");
  EXPECT_EQ(ReasonOf({{"type", "eval"}, {"samples", true}}), "bad_field");
  EXPECT_EQ(ReasonOf({{"type", "step"}, {"grad_wire_bytes", -5}}), "bad_field");
  EXPECT_EQ(ReasonOf({{"type", "step"}, {"grad_wire_bytes_fp32", 1.5}}), "bad_field");
  EXPECT_EQ(ReasonOf({{"type", "step"}, {"fp8_allreduce", {{"amax", -1.0}}}}), "bad_field");
  EXPECT_EQ(ReasonOf({{"type", "step"}, {"fp8_allreduce", {{"saturated", 0.5}}}}), "bad_field");
  EXPECT_EQ(ReasonOf({{"type", "step"}, {"fp8_allreduce", {{"note", "x"}}}}), "bad_field");
  EXPECT_EQ(ReasonOf({{"type", "step"}, {"fp8_allreduce", {1, 2}}}), "bad_field");
  EXPECT_EQ(ReasonOf({{"type", "dataset"}, {"manifest", "x"}}), "bad_field");
  auto bad = CheckJobEvent("checkpoint", {{"type", "checkpoint"}, {"step", 1}, {"path", 5}});
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->field, "path");
  EXPECT_EQ(bad->message, "path must be a non-empty string, got number");
}

TEST(JobEventCheckTest, SizeDepthAndTypeNameAreBounded) {
  EXPECT_EQ(ReasonOf({{"type", "note"}, {"blob", std::string(kMaxEventBytes, 'x')}}),
            "too_large");
  EXPECT_EQ(ReasonOf({{"type", "note"}, {"blob", std::string(kMaxEventBytes - 100, 'x')}}), "ok");
  json deep = 1;
  for (int i = 0; i < kMaxEventDepth + 1; ++i) deep = json::array({deep});
  EXPECT_EQ(ReasonOf({{"type", "note"}, {"deep", deep}}), "too_deep");
  EXPECT_EQ(ReasonOf({{"type", std::string(65, 'a')}}), "bad_type");
  EXPECT_EQ(ReasonOf({{"type", "has space"}}), "bad_type");
  EXPECT_EQ(ReasonOf({{"type", ""}}), "malformed");
  EXPECT_EQ(ReasonOf(json::array({1})), "malformed");
}

TEST(JobEventCheckTest, StorableTextReplacesWhatCannotBeStoredAndCutsOnACharacter) {
  EXPECT_EQ(StorableText(std::string("a\0b", 3), 100), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(StorableText("\xFFz", 100), "\xEF\xBF\xBDz");
  EXPECT_EQ(StorableText("ab\xE2\x82\xAC", 4), "ab");  // the euro sign would not fit whole
  EXPECT_EQ(StorableText("plain", 100), "plain");
}

}  // namespace
}  // namespace api
