#include "controlplane/service/scrape_targets.h"

#include <gtest/gtest.h>

namespace controlplane::service {
namespace {

using nlohmann::json;

NodeRecord Node(int64_t id, const std::string& name, const std::string& url,
                const std::string& state = "UP") {
  NodeRecord n;
  n.id = id;
  n.name = name;
  n.agent_url = url;
  n.state = state;
  return n;
}

TEST(ScrapeTargetsTest, ParsesAgentUrls) {
  auto e = ParseAgentUrl("http://10.0.0.7:9100");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->scheme, "http");
  EXPECT_EQ(e->address, "10.0.0.7:9100");
  auto s = ParseAgentUrl("https://node-a.example:443/prefix");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->scheme, "https");
  EXPECT_EQ(s->address, "node-a.example:443");
  auto v6 = ParseAgentUrl("http://[::1]:9100");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->address, "[::1]:9100");
  for (const char* bad : {"", "127.0.0.1:9100", "ftp://h:1", "http://host",
                          "http://h:", "http://h:12x", "http://[::1]", "http://u@h:1"}) {
    EXPECT_FALSE(ParseAgentUrl(bad)) << bad;
  }
}

TEST(ScrapeTargetsTest, ServerThenEveryUpAgentWithNodeLabels) {
  json t = ScrapeTargets("127.0.0.1:8080",
                         {Node(1, "node-a", "http://127.0.0.1:9001"),
                          Node(2, "node-b", "http://127.0.0.1:9002", "DOWN"), Node(3, "node-c", ""),
                          Node(4, "node-d", "https://10.0.0.4:9443")});
  EXPECT_EQ(t, json::parse(R"([
    {"targets": ["127.0.0.1:8080"], "labels": {"role": "server"}},
    {"targets": ["127.0.0.1:9001"], "labels": {"role": "agent", "node": "node-a", "node_id": "1"}},
    {"targets": ["10.0.0.4:9443"],
     "labels": {"role": "agent", "node": "node-d", "node_id": "4", "__scheme__": "https"}}
  ])"))
      << t.dump(2);
  EXPECT_EQ(ScrapeTargets("s:1", {}).size(), 1u);
  EXPECT_EQ(ScrapeTargets("s:1", {}, {}, /*server_tls=*/true)[0]["labels"],
            json::parse(R"({"role": "server", "__scheme__": "https"})"));
}

// Each running job's part on an UP node is a target of its own, after its node's, labelled from
// the server's records; parts on DOWN nodes or nodes without a usable URL are left out.
TEST(ScrapeTargetsTest, EachRunningJobOnAnUpNodeIsATargetLabelledByTheServer) {
  json t = ScrapeTargets("s:1",
                         {Node(4, "node-d", "https://10.0.0.4:9443"),
                          Node(1, "node-a", "http://127.0.0.1:9001"),
                          Node(2, "node-b", "http://127.0.0.1:9002", "DOWN"), Node(3, "node-c", "")},
                         {{12, "globex", 1}, {7, "acme", 4}, {9, "acme", 1}, {7, "acme", 2},
                          {8, "acme", 3}});
  EXPECT_EQ(t, json::parse(R"([
    {"targets": ["s:1"], "labels": {"role": "server"}},
    {"targets": ["127.0.0.1:9001"], "labels": {"role": "agent", "node": "node-a", "node_id": "1"}},
    {"targets": ["127.0.0.1:9001"],
     "labels": {"role": "job", "job": "9", "tenant": "acme", "node": "node-a", "node_id": "1",
                "__metrics_path__": "/metrics/jobs/9"}},
    {"targets": ["127.0.0.1:9001"],
     "labels": {"role": "job", "job": "12", "tenant": "globex", "node": "node-a", "node_id": "1",
                "__metrics_path__": "/metrics/jobs/12"}},
    {"targets": ["10.0.0.4:9443"],
     "labels": {"role": "agent", "node": "node-d", "node_id": "4", "__scheme__": "https"}},
    {"targets": ["10.0.0.4:9443"],
     "labels": {"role": "job", "job": "7", "tenant": "acme", "node": "node-d", "node_id": "4",
                "__scheme__": "https", "__metrics_path__": "/metrics/jobs/7"}}
  ])"))
      << t.dump(2);
}

}  // namespace
}  // namespace controlplane::service
