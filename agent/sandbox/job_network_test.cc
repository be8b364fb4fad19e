// The nft scripts of job network confinement, as text: what each rule allows, and that nothing
// but IP literals, numbers and the pool's uids reaches them. The rules against a kernel are
// job_network_netns_test.cc.
#include "agent/sandbox/job_network.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "agent/testing/test_util.h"

namespace agent {
namespace {

const JobNetworkTable kTable{"embody_jobs_test", 200000, 200999};

TEST(JobNetworkTest, CanonicalIpAcceptsLiteralsOnly) {
  EXPECT_EQ(*CanonicalIp("10.0.0.5"), "10.0.0.5");
  EXPECT_EQ(*CanonicalIp("::1"), "::1");
  EXPECT_EQ(*CanonicalIp("fd00:0:0:0::0001"), "fd00::1");
  for (const char* bad : {"", "node-a", "10.0.0.5/8", " 10.0.0.5", "10.0.0.5 ",
                          "10.0.0.5; flush ruleset", "10.0.0.5 } accept\nadd rule inet x y accept",
                          "fe80::1%eth0", "10.0.0", "256.1.1.1", "0x0a.0.0.1", "10.0.0.5\n"}) {
    EXPECT_FALSE(CanonicalIp(bad).ok()) << bad;
  }
}

TEST(JobNetworkTest, EndpointOfUrlWantsAnIpAndAPort) {
  auto a = EndpointOfUrl("http://127.0.0.1:8471");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->address, "127.0.0.1");
  EXPECT_EQ(a->port, 8471);
  auto b = EndpointOfUrl("https://[fd00::2]:443/v1/");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->address, "fd00::2");
  EXPECT_EQ(b->port, 443);
  for (const char* bad : {"http://node-a:80", "http://10.0.0.5", "http://10.0.0.5:0",
                          "http://10.0.0.5:65536", "ftp://10.0.0.5:21", "http://fd00::2:80",
                          "http://[fd00::2]", "http://10.0.0.5:80x", "10.0.0.5:80", ""}) {
    EXPECT_FALSE(EndpointOfUrl(bad).ok()) << bad;
  }
}

TEST(JobNetworkTest, TableReplacesAnOldOneAndRejectsStaleUids) {
  auto s = TableScript(kTable, {200004, 200007});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  // add then delete: replaces a table of that name, and is no error without one.
  EXPECT_LT(s->find("add table inet embody_jobs_test"),
            s->find("delete table inet embody_jobs_test"));
  EXPECT_TRUE(Has(*s, "type filter hook output priority filter; policy accept;"));
  EXPECT_TRUE(Has(*s, "elements = { 200004, 200007 }"));
  EXPECT_TRUE(Has(*s, "meta skuid @stale meta l4proto tcp reject with tcp reset"));
  EXPECT_TRUE(Has(*s, "meta skuid vmap @jobs"));
  // The answer is checked on the SYN-ACK alone, which carries the listener's uid.
  EXPECT_TRUE(Has(
      *s, "ct direction reply ct mark @marks tcp flags & (syn | ack) == syn | ack jump answer"));
  // Answers to a job's loopback connections: its own sockets, or another agent's job uids.
  EXPECT_TRUE(Has(*s, "meta skuid . ct mark @same_job accept"));
  EXPECT_TRUE(Has(*s, "meta skuid 200000-200999 accept"));
  // Held uids of other jobs come before the range and refuse.
  EXPECT_LT(s->find("meta skuid @uids ct mark set"), s->find("meta skuid 200000-200999 accept"));

  auto empty = TableScript(kTable, {});
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(Has(*empty, "elements"));

  EXPECT_FALSE(TableScript({"bad name", 1, 2}, {}).ok());
  EXPECT_FALSE(TableScript({"t; flush ruleset", 1, 2}, {}).ok());
  EXPECT_FALSE(TableScript({"t", 5, 4}, {}).ok());
}

TEST(JobNetworkTest, GrantAllowsAgentsAndPeersAndRejectsTheRest) {
  JobNetworkGrant g;
  g.uids = {200001};
  g.agents = {{"127.0.0.1", 8471}, {"fd00::3", 9000}};
  g.peers = {"10.0.0.5", "10.0.0.6", "10.0.0.5", "fd00::3"};
  auto s = GrantScript(kTable, g);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const std::string rule = "add rule inet embody_jobs_test job_200001 ";
  EXPECT_TRUE(Has(*s, "add element inet embody_jobs_test jobs { 200001 : jump job_200001 }"));
  EXPECT_TRUE(Has(*s, "add element inet embody_jobs_test same_job { 200001 . 200001 }"));
  EXPECT_TRUE(Has(*s, rule + "ip daddr 127.0.0.1 tcp dport 8471 accept"));
  EXPECT_TRUE(Has(*s, rule + "ip6 daddr fd00::3 tcp dport 9000 accept"));
  EXPECT_TRUE(Has(
      *s,
      rule + "meta skuid 200001 oifname \"lo\" meta l4proto tcp ct state new ct mark set 200001"));
  // Each peer once, v4 and v6 apart, only off the node (the node itself is `lo`, checked at the
  // answer).
  EXPECT_TRUE(Has(*s, rule + "oifname != \"lo\" ip daddr { 10.0.0.5, 10.0.0.6 } accept"));
  EXPECT_TRUE(Has(*s, rule + "oifname != \"lo\" ip6 daddr { fd00::3 } accept"));
  // The chain ends in rejects; nothing is accepted after them.
  const size_t tcp_reset = s->rfind(rule + "meta l4proto tcp reject with tcp reset");
  const size_t icmp = s->rfind(rule + "reject with icmpx admin-prohibited");
  ASSERT_NE(tcp_reset, std::string::npos);
  ASSERT_NE(icmp, std::string::npos);
  EXPECT_LT(tcp_reset, icmp);
  EXPECT_EQ(s->find("accept", icmp), std::string::npos);
  // A refused connection is reset at the client's next packet, before anything accepts it.
  EXPECT_LT(s->find("ct direction original ct mark and 0x80000000"), s->find("accept"));
  // No DNS, no wildcard.
  EXPECT_FALSE(Has(*s, "dport 53"));
  EXPECT_FALSE(Has(*s, "0.0.0.0"));
}

TEST(JobNetworkTest, GrantWithoutPeersAllowsOnlyTheAgentAndLoopback) {
  JobNetworkGrant g;
  g.uids = {200002, 200003};
  g.agents = {{"127.0.0.1", 8471}};
  auto s = GrantScript(kTable, g);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(Has(*s, "daddr {"));
  EXPECT_TRUE(Has(*s, "jobs { 200002 : jump job_200002, 200003 : jump job_200002 }"));
  EXPECT_TRUE(
      Has(*s, "same_job { 200002 . 200002, 200002 . 200003, 200003 . 200002, 200003 . 200003 }"));
  EXPECT_TRUE(
      Has(*s, "meta skuid 200003 oifname \"lo\" meta l4proto tcp ct state new ct mark set 200003"));
}

TEST(JobNetworkTest, GrantRefusesWhatIsNotAnAddressPortOrJobUid) {
  JobNetworkGrant g;
  g.uids = {200001};
  g.agents = {{"127.0.0.1", 8471}};
  g.peers = {"10.0.0.5 } accept; add rule inet embody_jobs_test output accept"};
  EXPECT_FALSE(GrantScript(kTable, g).ok());
  g.peers = {"node-b"};
  EXPECT_FALSE(GrantScript(kTable, g).ok());
  g.peers = {"10.0.0.0/8"};
  EXPECT_FALSE(GrantScript(kTable, g).ok());
  g.peers = {"10.0.0.5"};
  g.agents = {{"localhost", 8471}};
  EXPECT_FALSE(GrantScript(kTable, g).ok());
  g.agents = {{"127.0.0.1", 0}};
  EXPECT_FALSE(GrantScript(kTable, g).ok());
  g.agents = {{"127.0.0.1", 8471}};
  ASSERT_TRUE(GrantScript(kTable, g).ok());
  g.uids = {};
  EXPECT_FALSE(GrantScript(kTable, g).ok());
  g.uids = {0};  // root is never a job's
  EXPECT_FALSE(GrantScript(kTable, g).ok());
  g.uids = {201000};  // past the range
  EXPECT_FALSE(GrantScript(kTable, g).ok());
  g.uids = {200001, 200001};
  EXPECT_FALSE(GrantScript(kTable, g).ok());
}

TEST(JobNetworkTest, RevokeRemovesWhatTheGrantAdded) {
  auto s = RevokeScript(kTable, {200001, 200002});
  ASSERT_TRUE(s.ok());
  const std::string t = "inet embody_jobs_test ";
  // Every deletion follows an addition of the same entry, so a second revoke is no error.
  for (const char* set : {"jobs", "same_job", "marks", "uids"}) {
    const size_t added = s->find("add element " + t + set + " {");
    const size_t deleted = s->find("delete element " + t + set + " {");
    ASSERT_NE(added, std::string::npos) << set;
    ASSERT_NE(deleted, std::string::npos) << set;
    EXPECT_LT(added, deleted) << set;
  }
  EXPECT_TRUE(Has(*s, "delete element " + t + "jobs { 200001, 200002 }"));
  EXPECT_TRUE(Has(*s, "delete chain " + t + "job_200001"));
  EXPECT_FALSE(RevokeScript(kTable, {}).ok());
  EXPECT_FALSE(RevokeScript(kTable, {5}).ok());
}

}  // namespace
}  // namespace agent
