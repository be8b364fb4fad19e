// POST /v1/plan against the real server, on both stores: a valid plan, validation answered 400
// with the field named like the jobs API, authentication required, machine credentials refused,
// and nothing stored.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "controlplane/testing/server_test_fixture.h"

namespace controlplane {
namespace {

using nlohmann::json;

class PlanRoutesTest : public ServerTest {
 protected:
  static void SetUpTestSuite() { StartServer("plan"); }

  static json Body() {
    return json::parse(R"({
      "job": {"name": "plan-me", "kind": "train",
              "engine": {"model": {"d_model": 256, "layers": 4, "heads": 8, "mlp": 1024},
                         "optim": {"steps": 200}}},
      "gpus": [1, 2, 8],
      "cluster": {"name": "small", "ranks_per_node": 2,
                  "compute": {"flops_per_s": 7.3e10, "memory_gbps": 6.4},
                  "intra": {"gbps": 1.9, "latency_us": 0.9},
                  "inter": {"gbps": 1.25, "latency_us": 30}}
    })");
  }
};

TEST_F(PlanRoutesTest, PlansEachSize) {
  Reply r = Call("POST", "/v1/plan", Admin(), Body().dump());
  ASSERT_EQ(r.status, 200) << r.text;
  ASSERT_EQ(r.body["sizes"].size(), 3u);
  for (const json& s : r.body["sizes"]) {
    EXPECT_GT(s["step_seconds"].get<double>(), 0.0);
    EXPECT_GT(s["memory_per_rank_bytes"].get<double>(), 0.0);
    EXPECT_EQ(s["bottleneck"], "compute");
  }
  EXPECT_EQ(r.body["sizes"][0]["allreduce_seconds"], 0.0);
  EXPECT_GT(r.body["sizes"][2]["allreduce_seconds"].get<double>(), 0.0);
  EXPECT_TRUE(r.body["efficient_up_to_gpus"].is_number_integer());
  // Nothing was submitted.
  Reply jobs = Call("GET", "/v1/jobs?q=plan-me", Admin());
  ASSERT_EQ(jobs.status, 200);
  EXPECT_TRUE(jobs.body["jobs"].empty());
}

TEST_F(PlanRoutesTest, InvalidInputNamesTheField) {
  struct Case {
    std::function<void(json&)> edit;
    std::string field;
  };
  const std::vector<Case> cases = {
      {[](json& b) { b["job"]["engine"]["model"]["heads"] = 7; }, "job.engine.model.heads"},
      {[](json& b) { b["job"]["resources"] = {{"nodes", 0}}; }, "job.resources.nodes"},
      {[](json& b) { b["gpus"] = {2, 0}; }, "gpus[1]"},
      {[](json& b) { b["gpus"] = "256"; }, "gpus"},
      {[](json& b) { b["cluster"]["intra"]["gbps"] = -1; }, "cluster.intra.gbps"},
      {[](json& b) { b["cluster"].erase("ranks_per_node"); }, "cluster.ranks_per_node"},
      {[](json& b) { b["options"] = {{"precision", "fp16"}}; }, "options.precision"},
      {[](json& b) { b["extra"] = true; }, "extra"},
  };
  for (const Case& c : cases) {
    json body = Body();
    c.edit(body);
    Reply r = Call("POST", "/v1/plan", Admin(), body.dump());
    EXPECT_EQ(r.status, 400) << c.field << ": " << r.text;
    EXPECT_EQ(r.body["error"]["code"], "invalid_argument") << r.text;
    EXPECT_EQ(r.body["error"]["field"], c.field) << r.text;
  }
  Reply bad = Call("POST", "/v1/plan", Admin(), "{not json");
  EXPECT_EQ(bad.status, 400) << bad.text;
}

TEST_F(PlanRoutesTest, NeedsAPersonsToken) {
  EXPECT_EQ(Call("POST", "/v1/plan", "", Body().dump()).status, 401);
  EXPECT_EQ(Call("POST", "/v1/plan", Agent(), Body().dump()).status, 403);
}

}  // namespace
}  // namespace controlplane
