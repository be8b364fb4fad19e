#include "api/job_spec.h"

#include <functional>
#include <vector>

#include <gtest/gtest.h>

namespace api {
namespace {

using nlohmann::json;

json Valid() {
  return json::parse(R"({"name":"reach-1","kind":"train",
    "resources":{"nodes":2,"ranks_per_node":1,"slot_type":"cpu","slots_per_rank":1},
    "engine":{"optim":{"steps":50,"lr":0.001},"seed":3}})");
}

common::Status Err(const json& j, SpecLimits limits = {}) {
  auto r = ParseJobSpec(j, limits);
  return r.ok() ? common::Status::Ok() : r.status();
}

TEST(JobSpecTest, ValidSpecFillsDefaultsAndRoundTrips) {
  auto r = ParseJobSpec(Valid(), {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->resources.TotalRanks(), 2);
  EXPECT_EQ(r->engine.optim.steps, 50);
  EXPECT_EQ(r->engine.seed, 3u);
  EXPECT_EQ(r->priority, 50);
  EXPECT_EQ(r->engine.model.action_horizon, 16);
  auto again = ParseJobSpec(ToJson(*r), {});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(ToJson(*again), ToJson(*r));
}

TEST(JobSpecTest, Fp8ComputeRoundTrips) {
  json j = Valid();
  j["engine"]["fp8"] = {{"compute", true}};
  auto r = ParseJobSpec(j, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->engine.fp8.compute);
  EXPECT_EQ(r->engine.fp8.scaling, "block");
  EXPECT_EQ(ToJson(*r)["engine"]["fp8"]["compute"], true);
  EXPECT_FALSE(ToJson(*r)["engine"]["fp8"].contains("amax_history"));
  j["engine"]["fp8"] = {{"compute", true}, {"scaling", "delayed"}, {"amax_history", 32},
                        {"allreduce", true}};
  r = ParseJobSpec(j, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->engine.fp8.amax_history, 32);
  auto again = ParseJobSpec(ToJson(*r), {});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(ToJson(*again), ToJson(*r));
  EXPECT_EQ(again->engine.fp8.scaling, "delayed");
  EXPECT_EQ(again->engine.fp8.amax_history, 32);
  EXPECT_TRUE(again->engine.fp8.allreduce);
}

TEST(JobSpecTest, Fp8InferenceRoundTrips) {
  json j = Valid();
  j["engine"]["fp8"] = {{"inference", true}, {"allreduce", false}, {"compute", false}};
  auto r = ParseJobSpec(j, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->engine.fp8.inference);
  EXPECT_EQ(r->engine.fp8.format, "e4m3");
  auto again = ParseJobSpec(ToJson(*r), {});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(ToJson(*again), ToJson(*r));
  EXPECT_EQ(ToJson(*r)["engine"]["fp8"]["inference"], true);
  // Off (or all false) is the default and is not written back.
  j["engine"]["fp8"] = {{"inference", false}, {"allreduce", false}};
  auto off = ParseJobSpec(j, {});
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_FALSE(off->engine.fp8.inference);
  EXPECT_FALSE(ToJson(*off)["engine"].contains("fp8"));
}

TEST(JobSpecTest, Fp8AllreduceRoundTrips) {
  json j = Valid();
  j["engine"]["fp8"] = {{"allreduce", true}};
  auto r = ParseJobSpec(j, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->engine.fp8.allreduce);
  EXPECT_FALSE(r->engine.fp8.inference);
  EXPECT_EQ(ToJson(*r)["engine"]["fp8"], json({{"allreduce", true}}));
  auto again = ParseJobSpec(ToJson(*r), {});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->engine.fp8.allreduce);
  // Both options together.
  j["engine"]["fp8"] = {{"allreduce", true}, {"inference", true}};
  auto both = ParseJobSpec(j, {});
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  auto both_again = ParseJobSpec(ToJson(*both), {});
  ASSERT_TRUE(both_again.ok()) << both_again.status().ToString();
  EXPECT_TRUE(both_again->engine.fp8.allreduce && both_again->engine.fp8.inference);
}

json ValidRl() {
  return json::parse(R"({"name":"reach-ppo","kind":"rl","init_from":7,
    "resources":{"nodes":1,"ranks_per_node":2},
    "engine":{"model":{"d_model":64,"layers":2,"heads":4,"action_dim":3,"action_horizon":1},
              "rl":{"envs":8,"rollout_steps":32,"total_env_steps":100000,"gamma":0.98,
                    "minibatches":8,"value_clip":false,"lr":0.0005},"seed":4}})");
}

TEST(JobSpecTest, RlSpecParsesAndRoundTrips) {
  auto r = ParseJobSpec(ValidRl(), {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->kind, JobKind::kRl);
  EXPECT_EQ(r->init_from, 7);
  EXPECT_EQ(r->engine.rl.task, "reach");
  EXPECT_EQ(r->engine.rl.envs, 8);
  EXPECT_EQ(r->engine.rl.total_env_steps, 100000);
  EXPECT_DOUBLE_EQ(r->engine.rl.gamma, 0.98);
  EXPECT_FALSE(r->engine.rl.value_clip);
  EXPECT_EQ(r->engine.rl.epochs, 4);  // default
  const json out = ToJson(*r);
  EXPECT_FALSE(out["engine"].contains("data"));
  EXPECT_FALSE(out["engine"].contains("optim"));
  EXPECT_FALSE(out["engine"].contains("checkpoint"));
  auto again = ParseJobSpec(out, {});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(ToJson(*again), out);
}

TEST(JobSpecTest, RlFieldsAreValidatedByName) {
  struct Case {
    const char* what;
    std::function<void(json&)> mutate;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"unknown task", [](json& j) { j["engine"]["rl"]["task"] = "juggle"; }, "engine.rl.task"},
      {"zero envs", [](json& j) { j["engine"]["rl"]["envs"] = 0; }, "engine.rl.envs"},
      {"huge envs", [](json& j) { j["engine"]["rl"]["envs"] = 100000; }, "engine.rl.envs"},
      {"rollout type", [](json& j) { j["engine"]["rl"]["rollout_steps"] = "64"; },
       "engine.rl.rollout_steps"},
      {"zero env steps", [](json& j) { j["engine"]["rl"]["total_env_steps"] = 0; },
       "engine.rl.total_env_steps"},
      {"gamma > 1", [](json& j) { j["engine"]["rl"]["gamma"] = 1.5; }, "engine.rl.gamma"},
      {"lambda < 0", [](json& j) { j["engine"]["rl"]["gae_lambda"] = -0.1; },
       "engine.rl.gae_lambda"},
      {"clip 0", [](json& j) { j["engine"]["rl"]["clip"] = 0; }, "engine.rl.clip"},
      {"epochs 0", [](json& j) { j["engine"]["rl"]["epochs"] = 0; }, "engine.rl.epochs"},
      {"more minibatches than steps", [](json& j) { j["engine"]["rl"]["minibatches"] = 257; },
       "engine.rl.minibatches"},
      {"lr negative", [](json& j) { j["engine"]["rl"]["lr"] = -1e-3; }, "engine.rl.lr"},
      {"cameras", [](json& j) { j["engine"]["rl"]["cameras"] = 4; }, "engine.rl.cameras"},
      {"importance cap < 1", [](json& j) { j["engine"]["rl"]["importance_cap"] = 0.5; },
       "engine.rl.importance_cap"},
      {"value_clip type", [](json& j) { j["engine"]["rl"]["value_clip"] = 1; },
       "engine.rl.value_clip"},
      {"unknown rl key", [](json& j) { j["engine"]["rl"]["speed"] = 1; }, "engine.rl.speed"},
      {"rl not an object", [](json& j) { j["engine"]["rl"] = 3; }, "engine.rl"},
      {"rl missing", [](json& j) { j["engine"].erase("rl"); }, "engine.rl"},
      {"data on rl", [](json& j) { j["engine"]["data"] = json::object(); }, "engine.data"},
      {"optim on rl", [](json& j) { j["engine"]["optim"] = {{"lr", 0.1}}; }, "engine.optim"},
      {"fp8 on rl", [](json& j) { j["engine"]["fp8"] = {{"inference", true}}; }, "engine.fp8"},
      {"checkpoint on rl", [](json& j) { j["engine"]["checkpoint"] = {{"keep", 2}}; },
       "engine.checkpoint"},
      {"command on rl", [](json& j) { j["command"] = {"ls"}; }, "command"},
      {"push with action_dim 5", [](json& j) {
         j["engine"]["rl"]["task"] = "push";
         j["engine"]["model"] = {{"action_dim", 5}};
       }, "engine.model.action_dim"},
      {"eval block on rl", [](json& j) { j["eval"] = {{"checkpoint", 1}}; }, "eval"},
      {"eval_every negative", [](json& j) { j["engine"]["eval_every"] = -1; },
       "engine.eval_every"},
      {"eval_episodes 0", [](json& j) { j["engine"]["eval_episodes"] = 0; },
       "engine.eval_episodes"},
      {"latency mean negative", [](json& j) { j["engine"]["rl"]["env_latency"]["mean_ms"] = -1; },
       "engine.rl.env_latency.mean_ms"},
      {"latency tail alpha 1",
       [](json& j) { j["engine"]["rl"]["env_latency"] = {{"mean_ms", 5}, {"tail_alpha", 1.0}}; },
       "engine.rl.env_latency.tail_alpha"},
      {"latency unknown key", [](json& j) { j["engine"]["rl"]["env_latency"]["mode"] = "x"; },
       "engine.rl.env_latency.mode"},
      {"staleness negative",
       [](json& j) { j["engine"]["rl"]["disaggregated"]["max_staleness"] = -1; },
       "engine.rl.disaggregated.max_staleness"},
      {"disaggregated not an object", [](json& j) { j["engine"]["rl"]["disaggregated"] = true; },
       "engine.rl.disaggregated"},
      {"proximal unknown",
       [](json& j) { j["engine"]["rl"]["disaggregated"]["proximal"] = "average"; },
       "engine.rl.disaggregated.proximal"},
      {"stale_lr_scale 0",
       [](json& j) { j["engine"]["rl"]["disaggregated"]["stale_lr_scale"] = 0; },
       "engine.rl.disaggregated.stale_lr_scale"},
      {"stale_lr_scale over 1",
       [](json& j) { j["engine"]["rl"]["disaggregated"]["stale_lr_scale"] = 1.5; },
       "engine.rl.disaggregated.stale_lr_scale"},
      {"max_batch over envs", [](json& j) { j["engine"]["rl"]["env_async"]["max_batch"] = 9; },
       "engine.rl.env_async.max_batch"},
      {"max_wait_ms negative",
       [](json& j) { j["engine"]["rl"]["env_async"]["max_wait_ms"] = -0.5; },
       "engine.rl.env_async.max_wait_ms"},
      {"streaming alone", [](json& j) { j["engine"]["rl"]["streaming"] = json::object(); },
       "engine.rl.streaming"},
      {"rollout_ranks all of the job's ranks",
       [](json& j) { j["engine"]["rl"]["disaggregated"]["rollout_ranks"] = 2; },
       "engine.rl.disaggregated.rollout_ranks"},
      {"rollout_ranks not a multiple of the learners",
       [](json& j) {
         j["resources"]["ranks_per_node"] = 5;
         j["engine"]["rl"]["disaggregated"]["rollout_ranks"] = 3;
       },
       "engine.rl.disaggregated.rollout_ranks"},
      {"rollout_ranks negative",
       [](json& j) { j["engine"]["rl"]["disaggregated"]["rollout_ranks"] = -1; },
       "engine.rl.disaggregated.rollout_ranks"},
      {"micro_batches over envs",
       [](json& j) {
         j["engine"]["rl"]["disaggregated"] = json::object();
         j["engine"]["rl"]["streaming"]["micro_batches"] = 9;
       },
       "engine.rl.streaming.micro_batches"},
  };
  for (const Case& c : cases) {
    json j = ValidRl();
    c.mutate(j);
    const common::Status s = Err(j);
    EXPECT_EQ(s.code(), common::Code::kInvalidArgument) << c.what << ": " << s.ToString();
    EXPECT_EQ(s.field(), c.field) << c.what << ": " << s.ToString();
  }
}

TEST(JobSpecTest, RlAsyncLevelsAreOffUnlessNamedAndRoundTrip) {
  auto plain = ParseJobSpec(ValidRl(), {});
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_FALSE(plain->engine.rl.any_async());
  EXPECT_EQ(plain->engine.rl.env_latency.mean_ms, 0.0);
  EXPECT_FALSE(ToJson(*plain)["engine"]["rl"].contains("env_latency"));

  json j = ValidRl();
  j["engine"]["rl"]["env_latency"] = {{"mean_ms", 4}, {"jitter", 0.5}, {"tail_probability", 0.05}};
  j["engine"]["rl"]["disaggregated"] = {
      {"max_staleness", 2}, {"proximal", "current"}, {"stale_lr_scale", 0.5}};
  j["engine"]["rl"]["env_async"] = {{"max_batch", 4}, {"max_wait_ms", 1.5}};
  j["engine"]["rl"]["streaming"] = {{"micro_batches", 2}};
  auto r = ParseJobSpec(j, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const api::RlOptions& rl = r->engine.rl;
  EXPECT_TRUE(rl.disaggregated && rl.env_async && rl.streaming);
  EXPECT_EQ(rl.max_staleness, 2);
  EXPECT_EQ(rl.proximal, "current");
  EXPECT_DOUBLE_EQ(rl.stale_lr_scale, 0.5);
  EXPECT_EQ(api::RlOptions{}.proximal, "behaviour");  // the defaults docs/rl.md gives
  EXPECT_DOUBLE_EQ(api::RlOptions{}.stale_lr_scale, 0.25);
  EXPECT_EQ(rl.max_batch, 4);
  EXPECT_DOUBLE_EQ(rl.max_wait_ms, 1.5);
  EXPECT_EQ(rl.micro_batches, 2);
  EXPECT_DOUBLE_EQ(rl.env_latency.mean_ms, 4.0);
  EXPECT_DOUBLE_EQ(rl.env_latency.tail_scale, 5.0);  // default
  EXPECT_EQ(ToJson(*ParseJobSpec(ToJson(*r), {})), ToJson(*r));
  EXPECT_EQ(rl.rollout_ranks, 0);  // actors on threads unless named

  // Rollout ranks: 1 learner and 1 rollout rank of the job's 2, kept through the round trip.
  json ranks = j;
  ranks["engine"]["rl"]["disaggregated"]["rollout_ranks"] = 1;
  auto rr = ParseJobSpec(ranks, {});
  ASSERT_TRUE(rr.ok()) << rr.status().ToString();
  EXPECT_EQ(rr->engine.rl.rollout_ranks, 1);
  EXPECT_EQ(ParseJobSpec(ToJson(*rr), {})->engine.rl.rollout_ranks, 1);

  // One level alone leaves the others off.
  json only = ValidRl();
  only["engine"]["rl"]["env_async"] = json::object();
  auto o = ParseJobSpec(only, {});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_TRUE(o->engine.rl.env_async);
  EXPECT_FALSE(o->engine.rl.disaggregated || o->engine.rl.streaming);
}

TEST(JobSpecTest, RlTasksAndEvalEveryRoundTrip) {
  for (const char* task : {"push", "pick_place"}) {
    json j = ValidRl();
    j["engine"]["rl"]["task"] = task;
    j["engine"]["model"] = {{"action_dim", 4}};
    j["engine"]["eval_every"] = 5;
    j["engine"]["eval_episodes"] = 8;
    auto r = ParseJobSpec(j, {});
    ASSERT_TRUE(r.ok()) << task << ": " << r.status().ToString();
    EXPECT_EQ(r->engine.rl.task, task);
    EXPECT_EQ(r->engine.eval_every, 5);
    EXPECT_EQ(r->engine.eval_episodes, 8);
    EXPECT_EQ(ToJson(*ParseJobSpec(ToJson(*r), {})), ToJson(*r));
  }
  json train = Valid();
  train["engine"]["data"] = {{"dataset", "sim:push"}};
  train["engine"]["eval_every"] = 10;
  ASSERT_TRUE(ParseJobSpec(train, {}).ok());
  train["engine"]["data"] = {{"dataset", "dir:/data/reach"}};
  EXPECT_EQ(Err(train).field(), "engine.eval_every");  // a dataset directory names no task
  // Without eval_every the spec reads back as it did before the option existed.
  EXPECT_FALSE(ToJson(*ParseJobSpec(Valid(), {}))["engine"].contains("eval_every"));
}

json ValidEval() {
  return json::parse(R"({"name":"reach-eval","kind":"eval","resources":{"nodes":1},
    "eval":{"checkpoint_from_job":7,"tasks":["reach","push"],"episodes":30,"seed":4}})");
}

TEST(JobSpecTest, EvalSpecParsesAndRoundTrips) {
  auto r = ParseJobSpec(ValidEval(), {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->kind, JobKind::kEval);
  EXPECT_EQ(r->eval.checkpoint_from_job, 7);
  EXPECT_EQ(r->eval.tasks, (std::vector<std::string>{"reach", "push"}));
  EXPECT_EQ(r->eval.episodes, 30);
  EXPECT_EQ(r->eval.seed, 4u);
  EXPECT_FALSE(r->eval.fp8);
  // What the server stores after resolving the checkpoint reads back the same.
  r->init_from = 12;
  const json out = ToJson(*r);
  EXPECT_FALSE(out.contains("engine"));
  auto again = ParseJobSpec(out, {});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(ToJson(*again), out);
  EXPECT_EQ(again->init_from, 12);
  json by_id = ValidEval();
  by_id["eval"] = {{"checkpoint", 3}, {"fp8", true}};
  auto c = ParseJobSpec(by_id, {});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->eval.checkpoint, 3);
  EXPECT_EQ(c->eval.tasks, std::vector<std::string>{"reach"});  // default
  EXPECT_TRUE(c->eval.fp8);
}

TEST(JobSpecTest, EvalFieldsAreValidatedByName) {
  struct Case {
    const char* what;
    std::function<void(json&)> mutate;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"no eval block", [](json& j) { j.erase("eval"); }, "eval"},
      {"eval not an object", [](json& j) { j["eval"] = 3; }, "eval"},
      {"neither checkpoint", [](json& j) { j["eval"].erase("checkpoint_from_job"); },
       "eval.checkpoint_from_job"},
      {"both checkpoints", [](json& j) { j["eval"]["checkpoint"] = 2; }, "eval.checkpoint"},
      {"job id 0", [](json& j) { j["eval"]["checkpoint_from_job"] = 0; },
       "eval.checkpoint_from_job"},
      {"job id string", [](json& j) { j["eval"]["checkpoint_from_job"] = "7"; },
       "eval.checkpoint_from_job"},
      {"checkpoint negative",
       [](json& j) {
         j["eval"].erase("checkpoint_from_job");
         j["eval"]["checkpoint"] = -3;
       },
       "eval.checkpoint"},
      {"unknown task", [](json& j) { j["eval"]["tasks"] = {"reach", "stack"}; }, "eval.tasks[1]"},
      {"repeated task", [](json& j) { j["eval"]["tasks"] = {"push", "push"}; }, "eval.tasks[1]"},
      {"empty tasks", [](json& j) { j["eval"]["tasks"] = json::array(); }, "eval.tasks"},
      {"task not a string", [](json& j) { j["eval"]["tasks"] = {1}; }, "eval.tasks[0]"},
      {"zero episodes", [](json& j) { j["eval"]["episodes"] = 0; }, "eval.episodes"},
      {"too many episodes", [](json& j) { j["eval"]["episodes"] = 1001; }, "eval.episodes"},
      {"seed negative", [](json& j) { j["eval"]["seed"] = -1; }, "eval.seed"},
      {"fp8 type", [](json& j) { j["eval"]["fp8"] = "yes"; }, "eval.fp8"},
      {"unknown eval key", [](json& j) { j["eval"]["path"] = "/etc/passwd"; }, "eval.path"},
      {"engine on eval", [](json& j) { j["engine"] = json::object(); }, "engine"},
      {"command on eval", [](json& j) { j["command"] = {"ls"}; }, "command"},
      {"two ranks", [](json& j) { j["resources"]["ranks_per_node"] = 2; },
       "resources.ranks_per_node"},
  };
  for (const Case& c : cases) {
    json j = ValidEval();
    c.mutate(j);
    const common::Status s = Err(j);
    EXPECT_EQ(s.code(), common::Code::kInvalidArgument) << c.what << ": " << s.ToString();
    EXPECT_EQ(s.field(), c.field) << c.what << ": " << s.ToString();
  }
}

TEST(JobSpecTest, InitFromAndBestCheckpointRoundTrip) {
  json j = Valid();
  j["init_from"] = 42;
  j["engine"]["checkpoint"] = {{"keep", 2}, {"best", {{"metric", "loss"}, {"mode", "min"}}}};
  auto r = ParseJobSpec(j, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->init_from, 42);
  EXPECT_EQ(r->engine.checkpoint.best_metric, "loss");
  EXPECT_EQ(r->engine.checkpoint.best_mode, "min");
  auto again = ParseJobSpec(ToJson(*r), {});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(ToJson(*again), ToJson(*r));
  EXPECT_EQ(ToJson(*r)["engine"]["checkpoint"]["best"]["metric"], "loss");
  EXPECT_FALSE(ToJson(*ParseJobSpec(Valid(), {})).contains("init_from"));
}

// The transformer options of docs/design.md's example job spec parse, fill in and round-trip.
TEST(JobSpecTest, TransformerOptions) {
  json j = Valid();
  j["engine"]["model"] = {{"d_model", 256}, {"layers", 4},         {"heads", 8},
                          {"mlp", 1024},    {"action_horizon", 16}, {"action_dim", 7},
                          {"action_head", "flow"}, {"inference_steps", 10}};
  j["engine"]["data"] = {{"dataset", "sim:reach"}, {"tokens_per_row", 512}, {"rows_per_step", 8},
                         {"packing", true}};
  j["engine"]["attention"] = "varlen";
  auto r = ParseJobSpec(j, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->engine.model.heads, 8);
  EXPECT_EQ(r->engine.model.mlp, 1024);
  EXPECT_EQ(r->engine.model.action_head, "flow");
  EXPECT_EQ(r->engine.model.inference_steps, 10);
  EXPECT_EQ(r->engine.data.tokens_per_row, 512);
  EXPECT_EQ(r->engine.data.rows_per_step, 8);
  EXPECT_TRUE(r->engine.data.packing);
  EXPECT_EQ(r->engine.attention, "varlen");
  auto again = ParseJobSpec(ToJson(*r), {});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(ToJson(*again), ToJson(*r));

  // Defaults: varlen attention over packed 512-token rows; mlp follows d_model.
  auto d = ParseJobSpec(Valid(), {});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->engine.attention, "varlen");
  EXPECT_TRUE(d->engine.data.packing);
  EXPECT_EQ(d->engine.data.tokens_per_row, 512);
  EXPECT_EQ(d->engine.model.mlp, 4 * d->engine.model.d_model);
  j = Valid();
  j["engine"]["model"] = {{"d_model", 64}};
  EXPECT_EQ(ParseJobSpec(j, {})->engine.model.mlp, 256);

  // The padded baseline: one sample per row.
  j = Valid();
  j["engine"]["attention"] = "padded";
  j["engine"]["data"] = {{"packing", false}, {"tokens_per_row", 301}};  // 285 + 16 just fits
  auto p = ParseJobSpec(j, {});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_FALSE(p->engine.data.packing);
  EXPECT_EQ(p->engine.attention, "padded");
  // Messages say what to do.
  j["engine"]["data"]["packing"] = true;
  EXPECT_NE(Err(j).message().find("packing to false"), std::string::npos) << Err(j).ToString();
  j = Valid();
  j["engine"]["model"] = {{"d_model", 96}, {"heads", 5}};
  EXPECT_NE(Err(j).message().find("must divide d_model (96)"), std::string::npos);
}

TEST(JobSpecTest, CommandJob) {
  json j = {{"name", "c"}, {"kind", "command"}, {"resources", {{"nodes", 1}}},
            {"command", {"sh", "-c", "exit 3"}}};
  auto r = ParseJobSpec(j, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->command.size(), 3u);
  EXPECT_EQ(ToJson(*r)["command"][2], "exit 3");
}

struct BadCase {
  const char* what;
  std::function<void(json&)> mutate;
  common::Code code;
  const char* field;
};

TEST(JobSpecTest, EachRuleRejectsWithField) {
  using common::Code;
  std::vector<BadCase> cases = {
      {"unknown top field", [](json& j) { j["nmae"] = "x"; }, Code::kInvalidArgument, "nmae"},
      {"init_from type", [](json& j) { j["init_from"] = "12"; }, Code::kInvalidArgument,
       "init_from"},
      {"init_from negative", [](json& j) { j["init_from"] = -1; }, Code::kInvalidArgument,
       "init_from"},
      {"best without metric", [](json& j) { j["engine"]["checkpoint"]["best"] = json::object(); },
       Code::kInvalidArgument, "engine.checkpoint.best.metric"},
      {"best metric chars",
       [](json& j) { j["engine"]["checkpoint"]["best"] = {{"metric", "Loss!"}}; },
       Code::kInvalidArgument, "engine.checkpoint.best.metric"},
      {"best mode",
       [](json& j) { j["engine"]["checkpoint"]["best"] = {{"metric", "loss"}, {"mode", "low"}}; },
       Code::kInvalidArgument, "engine.checkpoint.best.mode"},
      {"best unknown key",
       [](json& j) { j["engine"]["checkpoint"]["best"] = {{"metric", "loss"}, {"x", 1}}; },
       Code::kInvalidArgument, "engine.checkpoint.best.x"},
      {"unknown nested", [](json& j) { j["resources"]["gpus"] = 1; }, Code::kInvalidArgument,
       "resources.gpus"},
      {"missing name", [](json& j) { j.erase("name"); }, Code::kInvalidArgument, "name"},
      {"name type", [](json& j) { j["name"] = 5; }, Code::kInvalidArgument, "name"},
      {"name chars", [](json& j) { j["name"] = "a b"; }, Code::kInvalidArgument, "name"},
      {"empty name", [](json& j) { j["name"] = ""; }, Code::kInvalidArgument, "name"},
      {"missing kind", [](json& j) { j.erase("kind"); }, Code::kInvalidArgument, "kind"},
      {"bad kind", [](json& j) { j["kind"] = "trian"; }, Code::kInvalidArgument, "kind"},
      {"rl without engine.rl", [](json& j) { j["kind"] = "rl"; }, Code::kInvalidArgument,
       "engine.rl"},
      {"eval without its block", [](json& j) { j["kind"] = "eval"; }, Code::kInvalidArgument,
       "engine"},
      {"missing resources", [](json& j) { j.erase("resources"); }, Code::kInvalidArgument,
       "resources"},
      {"resources type", [](json& j) { j["resources"] = 2; }, Code::kInvalidArgument,
       "resources"},
      {"zero nodes", [](json& j) { j["resources"]["nodes"] = 0; }, Code::kInvalidArgument,
       "resources.nodes"},
      {"negative nodes", [](json& j) { j["resources"]["nodes"] = -1; }, Code::kInvalidArgument,
       "resources.nodes"},
      {"float nodes", [](json& j) { j["resources"]["nodes"] = 1.5; }, Code::kInvalidArgument,
       "resources.nodes"},
      {"string nodes", [](json& j) { j["resources"]["nodes"] = "2"; }, Code::kInvalidArgument,
       "resources.nodes"},
      {"bool nodes", [](json& j) { j["resources"]["nodes"] = true; }, Code::kInvalidArgument,
       "resources.nodes"},
      {"huge nodes", [](json& j) { j["resources"]["nodes"] = 100000; }, Code::kInvalidArgument,
       "resources.nodes"},
      {"too many ranks", [](json& j) { j["resources"]["ranks_per_node"] = 1000; },
       Code::kInvalidArgument, "resources.ranks_per_node"},
      {"zero ranks", [](json& j) { j["resources"]["ranks_per_node"] = 0; },
       Code::kInvalidArgument, "resources.ranks_per_node"},
      {"slot type", [](json& j) { j["resources"]["slot_type"] = "tpu"; }, Code::kInvalidArgument,
       "resources.slot_type"},
      {"slots per rank", [](json& j) { j["resources"]["slots_per_rank"] = 0; },
       Code::kInvalidArgument, "resources.slots_per_rank"},
      {"priority range", [](json& j) { j["priority"] = 101; }, Code::kInvalidArgument,
       "priority"},
      {"max_restarts", [](json& j) { j["max_restarts"] = -1; }, Code::kInvalidArgument,
       "max_restarts"},
      {"negative time limit", [](json& j) { j["time_limit_seconds"] = -5; },
       Code::kInvalidArgument, "time_limit_seconds"},
      {"float time limit", [](json& j) { j["time_limit_seconds"] = 1.5; },
       Code::kInvalidArgument, "time_limit_seconds"},
      {"huge time limit", [](json& j) { j["time_limit_seconds"] = 18446744073709551615ULL; },
       Code::kInvalidArgument, "time_limit_seconds"},
      {"tiny memory", [](json& j) { j["resources"]["memory_per_rank_bytes"] = 1000; },
       Code::kInvalidArgument, "resources.memory_per_rank_bytes"},
      {"memory type", [](json& j) { j["resources"]["memory_per_rank_bytes"] = "1G"; },
       Code::kInvalidArgument, "resources.memory_per_rank_bytes"},
      {"command on train", [](json& j) { j["command"] = {"ls"}; }, Code::kInvalidArgument,
       "command"},
      {"engine type", [](json& j) { j["engine"] = "x"; }, Code::kInvalidArgument, "engine"},
      {"engine unknown", [](json& j) { j["engine"]["speed"] = 1; }, Code::kInvalidArgument,
       "engine.speed"},
      {"fp8 not an object", [](json& j) { j["engine"]["fp8"] = true; }, Code::kInvalidArgument,
       "engine.fp8"},
      {"fp8 unknown key", [](json& j) { j["engine"]["fp8"] = {{"weights", true}}; },
       Code::kInvalidArgument, "engine.fp8.weights"},
      {"fp8 inference type", [](json& j) { j["engine"]["fp8"] = {{"inference", "yes"}}; },
       Code::kInvalidArgument, "engine.fp8.inference"},
      {"fp8 format e5m2",
       [](json& j) { j["engine"]["fp8"] = {{"inference", true}, {"format", "e5m2"}}; },
       Code::kInvalidArgument, "engine.fp8.format"},
      {"fp8 format without inference", [](json& j) { j["engine"]["fp8"] = {{"format", "e4m3"}}; },
       Code::kInvalidArgument, "engine.fp8.format"},
      {"fp8 allreduce type", [](json& j) { j["engine"]["fp8"] = {{"allreduce", 1}}; },
       Code::kInvalidArgument, "engine.fp8.allreduce"},
      {"fp8 format with allreduce only",
       [](json& j) { j["engine"]["fp8"] = {{"allreduce", true}, {"format", "e4m3"}}; },
       Code::kInvalidArgument, "engine.fp8.format"},
      {"fp8 compute with bf16",
       [](json& j) {
         j["engine"]["fp8"] = {{"compute", true}};
         j["engine"]["precision"] = "bf16";
       },
       Code::kInvalidArgument, "engine.fp8.compute"},
      {"fp8 compute type", [](json& j) { j["engine"]["fp8"] = {{"compute", "on"}}; },
       Code::kInvalidArgument, "engine.fp8.compute"},
      {"fp8 scaling unknown",
       [](json& j) { j["engine"]["fp8"] = {{"compute", true}, {"scaling", "tensor"}}; },
       Code::kInvalidArgument, "engine.fp8.scaling"},
      {"fp8 scaling without compute",
       [](json& j) { j["engine"]["fp8"] = {{"scaling", "delayed"}}; }, Code::kInvalidArgument,
       "engine.fp8.scaling"},
      {"fp8 amax history with block scaling",
       [](json& j) { j["engine"]["fp8"] = {{"compute", true}, {"amax_history", 8}}; },
       Code::kInvalidArgument, "engine.fp8.amax_history"},
      {"fp8 amax history 0",
       [](json& j) {
         j["engine"]["fp8"] = {{"compute", true}, {"scaling", "delayed"}, {"amax_history", 0}};
       },
       Code::kInvalidArgument, "engine.fp8.amax_history"},
      {"rl block on train", [](json& j) { j["engine"]["rl"] = json::object(); },
       Code::kInvalidArgument, "engine.rl"},
      {"heads do not divide", [](json& j) { j["engine"]["model"] = {{"d_model", 96}, {"heads", 5}}; },
       Code::kInvalidArgument, "engine.model.heads"},
      {"default heads do not divide", [](json& j) { j["engine"]["model"] = {{"d_model", 10}}; },
       Code::kInvalidArgument, "engine.model.heads"},
      {"head dim > 128", [](json& j) { j["engine"]["model"] = {{"d_model", 512}, {"heads", 2}}; },
       Code::kInvalidArgument, "engine.model.heads"},
      {"heads zero", [](json& j) { j["engine"]["model"] = {{"heads", 0}}; },
       Code::kInvalidArgument, "engine.model.heads"},
      {"heads string", [](json& j) { j["engine"]["model"] = {{"heads", "8"}}; },
       Code::kInvalidArgument, "engine.model.heads"},
      {"mlp zero", [](json& j) { j["engine"]["model"] = {{"mlp", 0}}; }, Code::kInvalidArgument,
       "engine.model.mlp"},
      {"mlp float", [](json& j) { j["engine"]["model"] = {{"mlp", 1.5}}; },
       Code::kInvalidArgument, "engine.model.mlp"},
      {"model unknown", [](json& j) { j["engine"]["model"] = {{"depth", 3}}; },
       Code::kInvalidArgument, "engine.model.depth"},
      {"action_head unknown", [](json& j) { j["engine"]["model"] = {{"action_head", "mse"}}; },
       Code::kInvalidArgument, "engine.model.action_head"},
      {"action_head type", [](json& j) { j["engine"]["model"] = {{"action_head", 1}}; },
       Code::kInvalidArgument, "engine.model.action_head"},
      {"gaussian head not built",
       [](json& j) { j["engine"]["model"] = {{"action_head", "gaussian"}}; },
       Code::kUnimplemented, "engine.model.action_head"},
      {"inference_steps zero", [](json& j) { j["engine"]["model"] = {{"inference_steps", 0}}; },
       Code::kInvalidArgument, "engine.model.inference_steps"},
      {"action_horizon past positions",
       [](json& j) { j["engine"]["model"] = {{"action_horizon", 228}}; },
       Code::kInvalidArgument, "engine.model.action_horizon"},
      {"attention unknown", [](json& j) { j["engine"]["attention"] = "flash"; },
       Code::kInvalidArgument, "engine.attention"},
      {"attention type", [](json& j) { j["engine"]["attention"] = true; },
       Code::kInvalidArgument, "engine.attention"},
      {"padded attention with packing", [](json& j) { j["engine"]["attention"] = "padded"; },
       Code::kInvalidArgument, "engine.attention"},
      {"packing type", [](json& j) { j["engine"]["data"] = {{"packing", "yes"}}; },
       Code::kInvalidArgument, "engine.data.packing"},
      {"packing number", [](json& j) { j["engine"]["data"] = {{"packing", 1}}; },
       Code::kInvalidArgument, "engine.data.packing"},
      {"tokens_per_row zero", [](json& j) { j["engine"]["data"] = {{"tokens_per_row", 0}}; },
       Code::kInvalidArgument, "engine.data.tokens_per_row"},
      {"tokens_per_row huge", [](json& j) { j["engine"]["data"] = {{"tokens_per_row", 1 << 20}}; },
       Code::kInvalidArgument, "engine.data.tokens_per_row"},
      {"tokens_per_row below the longest sample",
       [](json& j) { j["engine"]["data"] = {{"tokens_per_row", 300}}; },
       Code::kInvalidArgument, "engine.data.tokens_per_row"},
      {"rows_per_step zero", [](json& j) { j["engine"]["data"] = {{"rows_per_step", 0}}; },
       Code::kInvalidArgument, "engine.data.rows_per_step"},
      {"data unknown", [](json& j) { j["engine"]["data"] = {{"shuffle", true}}; },
       Code::kInvalidArgument, "engine.data.shuffle"},
      {"lr negative", [](json& j) { j["engine"]["optim"]["lr"] = -1; }, Code::kInvalidArgument,
       "engine.optim.lr"},
      {"lr string", [](json& j) { j["engine"]["optim"]["lr"] = "fast"; },
       Code::kInvalidArgument, "engine.optim.lr"},
      {"steps zero", [](json& j) { j["engine"]["optim"]["steps"] = 0; }, Code::kInvalidArgument,
       "engine.optim.steps"},
      {"warmup > steps", [](json& j) { j["engine"]["optim"]["warmup_steps"] = 51; },
       Code::kInvalidArgument, "engine.optim.warmup_steps"},
      {"dataset", [](json& j) { j["engine"]["data"] = {{"dataset", "s3://x"}}; },
       Code::kInvalidArgument, "engine.data.dataset"},
      {"seed negative", [](json& j) { j["engine"]["seed"] = -3; }, Code::kInvalidArgument,
       "engine.seed"},
      {"d_model small", [](json& j) { j["engine"]["model"] = {{"d_model", 2}}; },
       Code::kInvalidArgument, "engine.model.d_model"},
  };
  for (const auto& c : cases) {
    json j = Valid();
    c.mutate(j);
    common::Status s = Err(j);
    EXPECT_EQ(s.code(), c.code) << c.what << ": " << s.ToString();
    EXPECT_EQ(s.field(), c.field) << c.what << ": " << s.ToString();
  }
}

// A dataset directory with the options that map its keys to the model's modalities.
TEST(JobSpecTest, DatasetDirectoryOptions) {
  json j = Valid();
  j["engine"]["data"] = {{"dataset", "dir:/data/lift/"},
                         {"cameras", {"agentview_image", "obs/robot0_eye_in_hand_image"}},
                         {"proprio", {"robot0_eef_pos"}},
                         {"image_size", 64},
                         {"language", "lift the cube"},
                         {"tokens_per_row", 256}};
  auto r = ParseJobSpec(j, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->engine.data.dataset, "dir:/data/lift");
  EXPECT_EQ(r->engine.data.cameras,
            (std::vector<std::string>{"obs/agentview_image", "obs/robot0_eye_in_hand_image"}));
  EXPECT_EQ(r->engine.data.proprio, std::vector<std::string>{"obs/robot0_eef_pos"});
  EXPECT_EQ(r->engine.data.image_size, 64);
  EXPECT_EQ(r->engine.data.language, "lift the cube");
  // tokens_per_row below the built-in stream's longest sample is fine: the engine checks it
  // against the dataset.
  EXPECT_EQ(r->engine.data.tokens_per_row, 256);
  auto again = ParseJobSpec(ToJson(*r), {});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(ToJson(*again), ToJson(*r));
  // Defaults for a directory.
  json d = Valid();
  d["engine"]["data"] = {{"dataset", "dir:/data/lift"}};
  auto rd = ParseJobSpec(d, {});
  ASSERT_TRUE(rd.ok()) << rd.status().ToString();
  EXPECT_EQ(rd->engine.data.image_size, 32);
  EXPECT_TRUE(rd->engine.data.cameras.empty());
  // The built-in stream's JSON carries no dataset options.
  EXPECT_FALSE(ToJson(*ParseJobSpec(Valid(), {}))["engine"]["data"].contains("cameras"));

  struct Case {
    const char* what;
    json data;
    const char* field;
  };
  const std::vector<Case> cases = {
      {"relative", {{"dataset", "dir:data/lift"}}, "engine.data.dataset"},
      {"dotdot", {{"dataset", "dir:/data/../etc"}}, "engine.data.dataset"},
      {"not a string", {{"dataset", 3}}, "engine.data.dataset"},
      {"options with sim", {{"image_size", 32}}, "engine.data.image_size"},
      {"image size not x8", {{"dataset", "dir:/d"}, {"image_size", 36}}, "engine.data.image_size"},
      {"image size huge", {{"dataset", "dir:/d"}, {"image_size", 4096}}, "engine.data.image_size"},
      {"camera not string", {{"dataset", "dir:/d"}, {"cameras", {1}}}, "engine.data.cameras[0]"},
      {"camera odd chars", {{"dataset", "dir:/d"}, {"cameras", {"a b"}}}, "engine.data.cameras[0]"},
      {"camera twice",
       {{"dataset", "dir:/d"}, {"cameras", {"a", "obs/a"}}},
       "engine.data.cameras[1]"},
      {"too many keys",
       {{"dataset", "dir:/d"}, {"proprio", json(std::vector<std::string>(17, "k"))}},
       "engine.data.proprio"},
      {"language control", {{"dataset", "dir:/d"}, {"language", "a\nb"}}, "engine.data.language"},
      {"language long",
       {{"dataset", "dir:/d"}, {"language", std::string(kMaxLanguageBytes + 1, 'a')}},
       "engine.data.language"},
  };
  for (const auto& c : cases) {
    json bad = Valid();
    bad["engine"]["data"] = c.data;
    common::Status s = Err(bad);
    EXPECT_EQ(s.code(), common::Code::kInvalidArgument) << c.what << ": " << s.ToString();
    EXPECT_EQ(s.field(), c.field) << c.what << ": " << s.ToString();
  }
}

// engine.data.demo_noise: the table tasks' demonstrations only, 0..1, written back only when set.
TEST(JobSpecTest, DemoNoiseAppliesToTheTableTasks) {
  json j = Valid();
  j["engine"]["data"] = {{"dataset", "sim:push"}, {"demo_noise", 1.0}};
  auto r = ParseJobSpec(j, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->engine.data.demo_noise, 1.0);
  EXPECT_EQ(ToJson(*r)["engine"]["data"]["demo_noise"], 1.0);
  auto again = ParseJobSpec(ToJson(*r), {});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->engine.data.demo_noise, 1.0);
  j["engine"]["data"] = {{"dataset", "sim:pick_place"}};
  auto d = ParseJobSpec(j, {});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->engine.data.demo_noise, kDefaultDemoNoise);
  EXPECT_FALSE(ToJson(*d)["engine"]["data"].contains("demo_noise"));
  for (const json& data : {json{{"dataset", "sim:push"}, {"demo_noise", 1.5}},
                           json{{"dataset", "sim:push"}, {"demo_noise", -0.1}},
                           json{{"dataset", "sim:push"}, {"demo_noise", "1"}},
                           json{{"dataset", "sim:reach"}, {"demo_noise", 0.5}},
                           json{{"dataset", "dir:/d"}, {"demo_noise", 0.5}}}) {
    json bad = Valid();
    bad["engine"]["data"] = data;
    EXPECT_EQ(Err(bad).field(), "engine.data.demo_noise") << data.dump();
  }
}

TEST(JobSpecTest, CommandRules) {
  json j = {{"name", "c"}, {"kind", "command"}, {"resources", {{"nodes", 1}}}};
  EXPECT_EQ(Err(j).field(), "command");
  j["command"] = json::array();
  EXPECT_EQ(Err(j).field(), "command");
  j["command"] = {"ls", 3};
  EXPECT_EQ(Err(j).field(), "command[1]");
  j["command"] = {"ls", ""};
  EXPECT_EQ(Err(j).field(), "command[1]");
  // argv entries are C strings (found by tests/fuzz: PostgreSQL's jsonb refused it with a 500).
  j["command"] = {"ls", std::string("a\0b", 3)};
  EXPECT_EQ(Err(j).field(), "command[1]");
  j["command"] = {"ls"};
  j["engine"] = json::object();
  EXPECT_EQ(Err(j).field(), "engine");
}

TEST(JobSpecTest, CommandDatasetsNameStoredVersionsOnce) {
  json j = {{"name", "c"}, {"kind", "command"}, {"resources", {{"nodes", 1}}},
            {"command", {"python3", "train.py"}}};
  auto plain = ParseJobSpec(j, SpecLimits{});
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->datasets.empty());
  EXPECT_FALSE(ToJson(*plain).contains("datasets"));  // specs stored before read back the same
  j["datasets"] = {"dataset:libero", "dataset:libero@2", "dataset:pusht@1"};
  auto r = ParseJobSpec(j, SpecLimits{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->datasets, (std::vector<std::string>{"dataset:libero", "dataset:libero@2",
                                                   "dataset:pusht@1"}));
  auto again = ParseJobSpec(ToJson(*r), SpecLimits{});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->datasets, r->datasets);

  struct Case {
    json datasets;
    std::string field;
  };
  json many = json::array();
  for (int i = 0; i <= kMaxCommandDatasets; ++i) many.push_back("dataset:d" + std::to_string(i));
  for (const Case& c : std::vector<Case>{
           {"dataset:x", "datasets"},
           {many, "datasets"},
           {{"dataset:x", 3}, "datasets[1]"},
           {{"dir:/data/x"}, "datasets[0]"},  // a directory needs no binding
           {{"sim:reach"}, "datasets[0]"},
           {{"dataset:bad name"}, "datasets[0]"},
           {{"dataset:x@0"}, "datasets[0]"},
           {{"dataset:x@1", "dataset:y", "dataset:x@1"}, "datasets[2]"},
           {{"dataset:x", "dataset:x"}, "datasets[1]"}}) {
    json bad = j;
    bad["datasets"] = c.datasets;
    EXPECT_EQ(Err(bad).field(), c.field) << c.datasets.dump();
  }
  json train = Valid();
  train["datasets"] = {"dataset:x"};
  EXPECT_EQ(Err(train).field(), "datasets");
}

TEST(JobSpecTest, TorchrunLauncherIsForCommandJobs) {
  json j = {{"name", "c"}, {"kind", "command"}, {"resources", {{"nodes", 2}, {"ranks_per_node", 2}}},
            {"command", {"train.py", "--steps", "10"}}};
  auto mpirun = ParseJobSpec(j, SpecLimits{});
  ASSERT_TRUE(mpirun.ok());
  EXPECT_EQ(mpirun->launcher, "mpirun");
  EXPECT_FALSE(ToJson(*mpirun).contains("launcher"));
  j["launcher"] = "torchrun";
  auto r = ParseJobSpec(j, SpecLimits{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->launcher, "torchrun");
  EXPECT_EQ(ParseJobSpec(ToJson(*r), SpecLimits{})->launcher, "torchrun");
  j["launcher"] = "deepspeed";
  EXPECT_EQ(Err(j).field(), "launcher");
  j["launcher"] = 1;
  EXPECT_EQ(Err(j).field(), "launcher");
  json train = Valid();
  train["launcher"] = "torchrun";
  EXPECT_EQ(Err(train).field(), "launcher");
}

TEST(JobSpecTest, DirectLauncherIsForOneNodesCommandJobs) {
  json j = {{"name", "c"}, {"kind", "command"}, {"resources", {{"nodes", 1}, {"ranks_per_node", 2}}},
            {"command", {"true"}}, {"launcher", "direct"}};
  auto r = ParseJobSpec(j, SpecLimits{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->launcher, "direct");
  EXPECT_EQ(ParseJobSpec(ToJson(*r), SpecLimits{})->launcher, "direct");
  j["resources"]["nodes"] = 2;  // ranks on another node need mpirun's daemons
  EXPECT_EQ(Err(j).field(), "launcher");
  json train = Valid();
  train["launcher"] = "direct";
  EXPECT_EQ(Err(train).field(), "launcher");
}

TEST(JobSpecTest, APythonEnvironmentIsAnAbsoluteVirtualenvPath) {
  json j = {{"name", "c"}, {"kind", "command"}, {"resources", {{"nodes", 1}}},
            {"command", {"python3", "train.py"}}};
  auto none = ParseJobSpec(j, SpecLimits{});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->python_env, "");
  EXPECT_FALSE(ToJson(*none).contains("environment"));
  j["environment"] = {{"python", "/srv/venvs/bc/"}};
  auto r = ParseJobSpec(j, SpecLimits{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->python_env, "/srv/venvs/bc");
  EXPECT_EQ(ToJson(*r)["environment"], json({{"python", "/srv/venvs/bc"}}));
  EXPECT_EQ(ParseJobSpec(ToJson(*r), SpecLimits{})->python_env, "/srv/venvs/bc");
  for (const char* bad : {"venv", "", "/", "/srv/../etc", "/srv/venv/..", "/srv/./venv",
                          "/srv/a:b", "/srv/a\nb"}) {
    j["environment"] = {{"python", bad}};
    EXPECT_EQ(Err(j).field(), "environment.python") << bad;
  }
  j["environment"] = {{"python", 3}};
  EXPECT_EQ(Err(j).field(), "environment.python");
  j["environment"] = json::object();
  EXPECT_EQ(Err(j).field(), "environment.python");
  j["environment"] = {{"python", "/srv/venv"}, {"conda", "/x"}};
  EXPECT_EQ(Err(j).field(), "environment.conda");
  j["environment"] = "/srv/venv";
  EXPECT_EQ(Err(j).field(), "environment");
  // An image is a stored one of the tenant's, NAME[@VERSION]; a registry reference is refused.
  j["environment"] = {{"image", "ghcr.io/x/y:1"}};
  EXPECT_EQ(Err(j).field(), "environment.image");
  for (const char* bad : {"", "a/b", "x@0", "x@y", "dataset:x", "dir:/x"}) {
    j["environment"] = {{"image", bad}};
    EXPECT_EQ(Err(j).field(), "environment.image") << bad;
  }
  j["environment"] = {{"image", 3}};
  EXPECT_EQ(Err(j).field(), "environment.image");
  j["environment"] = {{"image", "torch-env"}, {"python", "/srv/venv"}};
  EXPECT_EQ(Err(j).field(), "environment.image");
  j["environment"] = {{"image", "torch-env@2"}};
  auto img = ParseJobSpec(j, SpecLimits{});
  ASSERT_TRUE(img.ok()) << img.status().message();
  EXPECT_EQ(img->image, "torch-env@2");
  EXPECT_TRUE(img->python_env.empty());
  EXPECT_EQ(ToJson(*img)["environment"], json({{"image", "torch-env@2"}}));
  EXPECT_EQ(ParseJobSpec(ToJson(*img), SpecLimits{})->image, "torch-env@2");
  // GPUs are not mounted into an image: a GPU job in one is refused, not started blind.
  json gpu = j;
  gpu["resources"]["slot_type"] = "gpu";
  EXPECT_EQ(Err(gpu).field(), "environment.image");
  EXPECT_NE(Err(gpu).message().find("GPU jobs cannot run in an image yet"), std::string::npos);
  gpu["environment"] = {{"python", "/srv/venv"}};
  EXPECT_TRUE(ParseJobSpec(gpu, SpecLimits{}).ok());
  // Every node of a multi-node job prepares the image before its ranks start.
  json two_nodes = j;
  two_nodes["resources"]["nodes"] = 2;
  auto img2 = ParseJobSpec(two_nodes, SpecLimits{});
  ASSERT_TRUE(img2.ok()) << img2.status().message();
  EXPECT_EQ(img2->image, "torch-env@2");
  json train = Valid();
  train["environment"] = {{"python", "/srv/venv"}};
  EXPECT_EQ(Err(train).field(), "environment");
}

TEST(JobSpecTest, ConfiguredLimits) {
  SpecLimits limits;
  limits.max_nodes = 4;
  limits.max_ranks = 8;
  json j = Valid();
  j["resources"]["nodes"] = 5;
  EXPECT_EQ(Err(j, limits).field(), "resources.nodes");
  j["resources"]["nodes"] = 4;
  j["resources"]["ranks_per_node"] = 3;
  EXPECT_EQ(Err(j, limits).field(), "resources.ranks_per_node");
  j["resources"]["ranks_per_node"] = 2;
  EXPECT_TRUE(Err(j, limits).ok());
}

TEST(JobSpecTest, TextEdgeCases) {
  SpecLimits limits;
  EXPECT_EQ(ParseJobSpecText("{not json", limits).status().code(), common::Code::kInvalidArgument);
  EXPECT_EQ(ParseJobSpecText("[]", limits).status().code(), common::Code::kInvalidArgument);
  EXPECT_EQ(ParseJobSpecText("", limits).status().code(), common::Code::kInvalidArgument);
  limits.max_body_bytes = 10;
  auto r = ParseJobSpecText(Valid().dump(), limits);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("exceeds"), std::string::npos);
}

TEST(JobSpecTest, PrecisionIsFp32OrBf16) {
  auto d = ParseJobSpec(Valid(), {});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->engine.precision, "fp32");
  json j = Valid();
  j["engine"]["precision"] = "bf16";
  auto r = ParseJobSpec(j, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->engine.precision, "bf16");
  EXPECT_EQ(ToJson(*r)["engine"]["precision"], "bf16");
  auto again = ParseJobSpec(ToJson(*r), {});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->engine.precision, "bf16");
  for (const json& bad : {json("fp16"), json("BF16"), json(16), json(nullptr)}) {
    j["engine"]["precision"] = bad;
    const common::Status s = Err(j);
    EXPECT_EQ(s.code(), common::Code::kInvalidArgument) << bad.dump();
    EXPECT_EQ(s.field(), "engine.precision") << bad.dump();
  }
  j["engine"]["precision"] = "fp16";
  EXPECT_NE(Err(j).message().find("fp32"), std::string::npos) << Err(j).message();
}

}  // namespace
}  // namespace api
