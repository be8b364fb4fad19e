// ParsePipelineSpec: every refusal names its field and the rule; references resolve in place.
#include "controlplane/service/pipeline_spec.h"

#include <gtest/gtest.h>

namespace controlplane::service {
namespace {

using nlohmann::json;

json Train(const std::string& dataset = "sim:reach") {
  return {{"kind", "train"},
          {"resources", {{"nodes", 1}}},
          {"engine", {{"data", {{"dataset", dataset}}}, {"optim", {{"steps", 10}}}}}};
}

json Eval(const json& from, bool fp8 = false) {
  json e = {{"kind", "eval"},
            {"resources", {{"nodes", 1}}},
            {"eval", {{"tasks", {"reach"}}, {"episodes", 4}, {"fp8", fp8}}}};
  e["eval"]["checkpoint_from_step"] = from;
  return e;
}

// import -> bc -> eval-bc, rl from bc -> eval-rl, eval-fp8 of bc, a gate on the two evals.
json Recipe() {
  json bc = Train();
  bc["engine"]["data"]["dataset"] = {{"step", "import"}};
  json rl = {{"kind", "rl"},
             {"resources", {{"nodes", 1}}},
             {"init_from", {{"step", "bc"}}},
             {"engine", {{"rl", {{"total_env_steps", 1024}}}}}};
  return {{"name", "recipe"},
          {"steps",
           {{{"name", "import"},
             {"import", {{"name", "demos"}, {"source", {{"path", "/data/demos.hdf5"}}}}}},
            {{"name", "bc"}, {"needs", {"import"}}, {"retries", 1}, {"job", bc}},
            {{"name", "eval-bc"}, {"needs", {"bc"}}, {"job", Eval("bc")}},
            {{"name", "rl"}, {"needs", {"bc"}}, {"job", rl}},
            {{"name", "eval-rl"}, {"needs", {"rl"}}, {"job", Eval("rl")}},
            {{"name", "eval-fp8"}, {"needs", {"bc"}}, {"job", Eval("bc", true)}},
            {{"name", "gate"},
             {"needs", {"eval-fp8", "eval-bc"}},
             {"when",
              {{"step", "eval-fp8"},
               {"metric", "success_rate"},
               {"at_least", {{"step", "eval-bc"}, {"metric", "success_rate"}, {"minus", 0.03}}}}}}}}};
}

common::Status Parse(const json& j) { return ParsePipelineSpec(j, api::SpecLimits{}).status(); }

void ExpectRefused(const json& j, const std::string& field, const std::string& words) {
  common::Status st = Parse(j);
  EXPECT_EQ(st.code(), common::Code::kInvalidArgument) << st.ToString();
  EXPECT_EQ(st.field(), field) << st.ToString();
  EXPECT_NE(st.message().find(words), std::string::npos) << st.ToString();
}

TEST(PipelineSpecTest, TheRecipeParsesWithKindsReferencesAndTheGate) {
  auto spec = ParsePipelineSpec(Recipe(), api::SpecLimits{});
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ASSERT_EQ(spec->steps.size(), 7u);
  EXPECT_EQ(spec->steps[0].job_kind, "import");
  EXPECT_EQ(spec->steps[0].import_step->dataset_name, "demos");
  EXPECT_EQ(spec->steps[1].job_kind, "train");
  EXPECT_EQ(spec->steps[1].retries, 1);
  EXPECT_EQ(spec->steps[1].referenced, std::vector<std::string>{"import"});
  EXPECT_EQ(spec->steps[1].job["name"], "recipe.bc");  // named after pipeline and step
  EXPECT_EQ(spec->steps[3].job_kind, "rl");
  EXPECT_EQ(spec->steps[4].job_kind, "eval");
  const Gate& g = *spec->steps[6].when;
  EXPECT_EQ(g.value.step, "eval-fp8");
  ASSERT_TRUE(g.reference);
  EXPECT_EQ(g.reference->step, "eval-bc");
  EXPECT_DOUBLE_EQ(g.minus, 0.03);
  EXPECT_TRUE(spec->steps[6].job.is_null());
  EXPECT_EQ(spec->steps[6].job_kind, "");
}

TEST(PipelineSpecTest, ReferencesResolveToConcreteValuesTheJobSpecParserTakes) {
  auto spec = ParsePipelineSpec(Recipe(), api::SpecLimits{});
  ASSERT_TRUE(spec.ok());
  auto resolve = [](const std::string& step, RefKind kind) -> common::Result<json> {
    if (kind == RefKind::kDataset) return json("dataset:demos@" + std::to_string(step.size()));
    return json(step == "bc" ? 41 : 42);
  };
  auto bc = ResolveStepJob(spec->steps[1].job, resolve, "steps[1].job");
  ASSERT_TRUE(bc.ok());
  EXPECT_EQ((*bc)["engine"]["data"]["dataset"], "dataset:demos@6");
  auto rl = ResolveStepJob(spec->steps[3].job, resolve, "");
  EXPECT_EQ((*rl)["init_from"], 41);
  auto ev = ResolveStepJob(spec->steps[4].job, resolve, "");
  EXPECT_EQ((*ev)["eval"]["checkpoint"], 42);
  EXPECT_FALSE((*ev)["eval"].contains("checkpoint_from_step"));
  EXPECT_TRUE(api::ParseJobSpec(*ev, api::SpecLimits{}).ok());
  // A lookup's refusal comes back as it was.
  auto failing = [](const std::string&, RefKind) -> common::Result<json> {
    return common::FailedPrecondition("no checkpoint yet");
  };
  EXPECT_EQ(ResolveStepJob(spec->steps[3].job, failing, "").status().code(),
            common::Code::kFailedPrecondition);
}

TEST(PipelineSpecTest, StructureIsCheckedNamingTheField) {
  json j = Recipe();
  j["steps"][2]["name"] = "bc";
  ExpectRefused(j, "steps[2].name", "used twice");
  j = Recipe();
  j["steps"][2]["needs"] = {"nope"};
  ExpectRefused(j, "steps[2].needs[0]", "no step named");
  j = Recipe();
  j["steps"][1]["needs"] = {"import", "eval-rl"};  // bc -> eval-rl -> rl -> bc
  ExpectRefused(j, "steps[1].needs", "cycle");
  j = Recipe();
  j["steps"][1]["needs"] = {"bc"};
  ExpectRefused(j, "steps[1].needs[0]", "itself");
  j = Recipe();
  j["steps"][1]["retries"] = 11;
  ExpectRefused(j, "steps[1].retries", "0..10");
  j = Recipe();
  j["steps"][1]["colour"] = "red";
  ExpectRefused(j, "steps[1].colour", "unknown field");
  j = Recipe();
  j["steps"] = json::array();
  ExpectRefused(j, "steps", "1-64");
  j = Recipe();
  for (int i = 0; i < 60; ++i) j["steps"].push_back({{"name", "x" + std::to_string(i)}, {"job", Train()}});
  ExpectRefused(j, "steps", "1-64");
  j = Recipe();
  j["name"] = "bad name";
  ExpectRefused(j, "name", "letters");
  j = Recipe();
  j["steps"][6].erase("when");
  ExpectRefused(j, "steps[6].job", "a job, an import, or a gate");
}

TEST(PipelineSpecTest, ReferencesMustNameStepsNeededAndOfTheRightKind) {
  json j = Recipe();
  j["steps"][4]["needs"] = {"bc"};  // eval-rl reads rl's checkpoint without needing it
  ExpectRefused(j, "steps[4].job.eval.checkpoint_from_step", "not among the steps");
  j = Recipe();
  j["steps"][2]["job"]["eval"]["checkpoint_from_step"] = "import";
  j["steps"][2]["needs"] = {"bc", "import"};
  ExpectRefused(j, "steps[2].job.eval.checkpoint_from_step", "makes no checkpoint");
  j = Recipe();
  j["steps"][3]["job"]["engine"]["data"] = {{"dataset", {{"step", "bc"}}}};
  ExpectRefused(j, "steps[3].job.engine.data.dataset", "imports no dataset");
  j = Recipe();
  j["steps"][3]["job"]["init_from"] = {{"step", "bc"}, {"job", 3}};
  ExpectRefused(j, "steps[3].job.init_from", "{\"step\": NAME}");
  j = Recipe();
  j["steps"][4]["job"]["eval"]["checkpoint_from_job"] = 5;
  ExpectRefused(j, "steps[4].job.eval.checkpoint_from_step", "exactly one");
  j = Recipe();
  j["steps"][5]["job"]["eval"]["checkpoint_from_step"] = "rl";
  j["steps"][5]["needs"] = {"rl"};
  ExpectRefused(j, "steps[5].job.eval.fp8", "behaviour-cloning");
  // A gate reads eval steps the step needs.
  j = Recipe();
  j["steps"][6]["needs"] = {"eval-fp8"};
  ExpectRefused(j, "steps[6].when.at_least.step", "not among the steps");
  j = Recipe();
  j["steps"][6]["when"]["step"] = "bc";
  j["steps"][6]["needs"] = {"bc", "eval-bc"};
  ExpectRefused(j, "steps[6].when.step", "not one");
  j = Recipe();
  j["steps"][6]["when"]["metric"] = "loss";
  ExpectRefused(j, "steps[6].when.metric", "success_rate");
  j = Recipe();
  j["steps"][6]["when"]["at_least"]["minus"] = -1;
  ExpectRefused(j, "steps[6].when.at_least.minus", "[0, 1e6]");
  j = Recipe();
  j["steps"][6]["when"]["at_least"] = 0.5;  // a number is a threshold too
  EXPECT_TRUE(Parse(j).ok());
}

TEST(PipelineSpecTest, EachJobIsCheckedAsPostJobsWouldAndImportsOnlyFromAPath) {
  json j = Recipe();
  j["steps"][1]["job"]["resources"]["nodes"] = 0;
  common::Status st = Parse(j);
  EXPECT_EQ(st.code(), common::Code::kInvalidArgument);
  EXPECT_EQ(st.field(), "steps[1].job.resources.nodes") << st.ToString();
  j = Recipe();
  j["steps"][1]["job"]["kind"] = "import";
  EXPECT_EQ(Parse(j).code(), common::Code::kInvalidArgument);
  j = Recipe();
  j["steps"][0]["import"]["source"] = {{"upload", {{"bytes", 10}, {"sha256", std::string(64, 'a')}}}};
  ExpectRefused(j, "steps[0].import.source.upload", "from a path");
  j = Recipe();
  j["steps"][0]["import"]["source"] = {{"path", "relative/x.hdf5"}};
  EXPECT_EQ(Parse(j).code(), common::Code::kInvalidArgument);
  EXPECT_EQ(ParsePipelineSpecText("{", api::SpecLimits{}).status().code(),
            common::Code::kInvalidArgument);
  EXPECT_EQ(ParsePipelineSpecText(std::string(kMaxPipelineBodyBytes + 1, ' '), api::SpecLimits{})
                .status()
                .code(),
            common::Code::kInvalidArgument);
}

}  // namespace
}  // namespace controlplane::service
