#include "api/v1/node.h"

#include <gtest/gtest.h>

namespace api::v1 {
namespace {

using nlohmann::json;

Node SampleNode() {
  Node n;
  n.id = 3;
  n.name = "n1";
  n.address = "10.0.0.3";
  n.agent_url = "http://10.0.0.3:7070";
  n.state = "UP";
  n.cpu_slots = 16;
  n.gpus = {{0, "H100", int64_t{80} << 30}, {1, "H100", int64_t{80} << 30}};
  n.memory_bytes = int64_t{512} << 30;
  n.slots_used = 4;
  n.isolation = NodeIsolation{true, "v2", true};
  n.last_heartbeat_ms = 1'767'322'800'000;
  return n;
}

TEST(NodeViewTest, WritesEveryField) {
  Node n = SampleNode();
  n.gpus.resize(1);
  EXPECT_EQ(ToJson(n).dump(),
            R"({"address":"10.0.0.3","agent_url":"http://10.0.0.3:7070","cpu_slots":16,)"
            R"("draining":false,"gpus":[{"index":0,"memory_bytes":85899345920,"name":"H100"}],)"
            R"("id":3,"isolation":{"cgroup":"v2","rlimits":true,"unprivileged_uid":true},)"
            R"("last_heartbeat":"2026-01-02T03:00:00.000Z","memory_bytes":549755813888,)"
            R"("name":"n1","slots_used":4,"state":"UP"})");
}

TEST(NodeViewTest, RoundTripsAndKeepsIsolationNotSaid) {
  Node old = SampleNode();
  old.id = 4;
  old.gpus.clear();
  old.isolation.reset();
  old.draining = true;
  EXPECT_EQ(ToJson(old)["isolation"], json::object());
  NodeList list{{SampleNode(), old}};
  auto back = ParseNodeList(ToJson(list));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, list);
}

TEST(NodeViewTest, OptionalGpuAndIsolationFieldsTakeTheirDefaults) {
  auto gpus = ParseGpus(json::parse(R"([{"index":2}])"));
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  ASSERT_EQ(gpus->size(), 1u);
  EXPECT_EQ((*gpus)[0], (Gpu{2, "", 0}));
  auto iso = ParseNodeIsolation(json::parse(R"({"cgroup":"v1"})"));
  ASSERT_TRUE(iso.ok());
  EXPECT_EQ(*iso, (NodeIsolation{false, "v1", false}));
  EXPECT_EQ(*ParseNodeIsolation(json::object()), std::nullopt);
}

TEST(NodeViewTest, AWrongTypeIsRefusedWithItsPath) {
  json j = ToJson(NodeList{{SampleNode()}});
  j["nodes"][0]["gpus"][1]["index"] = "1";
  auto r = ParseNodeList(j);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().field(), "nodes[0].gpus[1].index");
  json n = ToJson(SampleNode());
  n["isolation"]["rlimits"] = "yes";
  EXPECT_EQ(ParseNode(n).status().field(), "isolation.rlimits");
  EXPECT_EQ(ParseNode(n).status().message(), "must be true or false");
  n = ToJson(SampleNode());
  n["draining"] = 0;
  EXPECT_EQ(ParseNode(n).status().field(), "draining");
  EXPECT_EQ(ParseGpus(json::object()).status().field(), "gpus");
}

}  // namespace
}  // namespace api::v1
