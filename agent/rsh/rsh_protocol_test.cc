#include "agent/rsh/rsh_protocol.h"

#include <algorithm>

#include <gtest/gtest.h>

namespace agent {
namespace {

// Open MPI 4.1.4's words, as its rsh launcher passed them to a recording agent.
std::vector<std::string> OrtedWords() {
  return {" orted", "--daemonize", "-mca", "ess", "\"env\"", "-mca", "ess_base_jobid",
          "\"1657995264\"", "-mca", "ess_base_vpid", "1", "-mca", "orte_node_regex",
          "\"vm,[2:10].213.9.1,[2:10].213.9.2@0(3)\"", "-mca", "orte_hnp_uri",
          "\"1657995264.0;tcp://192.0.2.2:44431;tcp6://[fd00::2]:42215\"", "--mca",
          "plm_rsh_no_tree_spawn", "\"1\"", "-mca", "orte_output_filename",
          "\"/data/jobs/job-7/ranks:nojobid,nocopy\"", "-mca", "pmix", "\"^s1,s2,cray,isolated\""};
}

TEST(RshProtocolTest, ParsesWhatMpirunPasses) {
  auto inv = ParseRshArgs({"--hosts", "/j/rsh-hosts.json", "-x", "10.213.0.2", " orted", "-mca",
                           "ess", "\"env\""});
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->hosts_file, "/j/rsh-hosts.json");
  EXPECT_EQ(inv->host, "10.213.0.2");
  EXPECT_EQ(inv->words, (std::vector<std::string>{" orted", "-mca", "ess", "\"env\""}));
  EXPECT_FALSE(ParseRshArgs({"--hosts", "/j/h.json"}).ok());                // no host
  EXPECT_FALSE(ParseRshArgs({"--hosts", "/j/h.json", "10.213.0.2"}).ok());  // no command
  EXPECT_FALSE(ParseRshArgs({"10.213.0.2", "orted"}).ok());                 // no --hosts
  EXPECT_EQ(inv->ca_file, "");
  // The head agent's --ca-file, for agents that serve TLS; a word after HOST is the command's.
  inv = ParseRshArgs({"--hosts", "/j/h.json", "--ca-file", "/etc/embody/ca.pem", "10.213.0.2",
                      "orted", "--ca-file", "x"});
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->ca_file, "/etc/embody/ca.pem");
  EXPECT_EQ(inv->host, "10.213.0.2");
  EXPECT_EQ(inv->words, (std::vector<std::string>{"orted", "--ca-file", "x"}));
}

TEST(RshProtocolTest, TakesOpenMpisDaemonAndUnquotesItsArguments) {
  auto cmd = ParseDaemonCommand(OrtedWords());
  ASSERT_TRUE(cmd.ok()) << cmd.status().ToString();
  EXPECT_EQ(cmd->program, "orted");
  ASSERT_GE(cmd->args.size(), 4u);
  EXPECT_EQ(cmd->args[3], "env");
  EXPECT_EQ(cmd->args[15], "1657995264.0;tcp://192.0.2.2:44431;tcp6://[fd00::2]:42215");
  // This node's daemon runs attached, writing its ranks' files in its own job directory.
  auto args = DaemonArgsForNode(*cmd, "/mine/jobs/job-7/ranks");
  EXPECT_EQ(std::count(args.begin(), args.end(), "--daemonize"), 0);
  auto out = std::find(args.begin(), args.end(), "orte_output_filename");
  ASSERT_NE(out, args.end());
  EXPECT_EQ(*(out + 1), "/mine/jobs/job-7/ranks:nojobid,nocopy");
  EXPECT_EQ(args.size(), cmd->args.size() - 1);

  // --prefix puts path settings first, and a daemon path; both are the node's own business.
  auto prefixed = ParseDaemonCommand({"PATH=/opt/ompi/bin:$PATH", ";", "export", "PATH", ";",
                                      "LD_LIBRARY_PATH=/opt/ompi/lib:$LD_LIBRARY_PATH", ";",
                                      "export", "LD_LIBRARY_PATH", ";", "/opt/ompi/bin/orted",
                                      "-mca", "ess", "\"env\""});
  ASSERT_TRUE(prefixed.ok()) << prefixed.status().ToString();
  EXPECT_EQ(prefixed->program, "orted");
  EXPECT_EQ(prefixed->args, (std::vector<std::string>{"-mca", "ess", "env"}));
  EXPECT_TRUE(ParseDaemonCommand({"prted", "--prtemca", "ess", "env"}).ok());
}

// A job may call the endpoint itself with any words: nothing but the daemon is ever started.
TEST(RshProtocolTest, RefusesAnythingButTheDaemon) {
  const std::vector<std::vector<std::string>> hostile = {
      {"/bin/sh", "-c", "id"},
      {"bash"},
      {"orted-evil"},
      {"/tmp/orted/../sh"},  // basename is "sh"
      {"orted", ";", "rm", "-rf", "/"},
      {"orted", "&&", "id"},
      {"orted", "|", "id"},
      {"orted", ">", "/etc/passwd"},
      {"orted", "$(id)"},
      {"orted", "`id`"},
      {"orted", "\"$(id)\""},
      {"orted", "$HOME"},
      {"FOO=bar", ";", "orted"},        // only path settings may precede it
      {"PATH=/x", ";", "sh", "-c", "x"},
      {"export", "LD_PRELOAD", ";", "orted"},
      {"orted", "\"unterminated"},
      {"orted", "a\nb"},
      {"orted", std::string("a\0b", 3)},
      {},
      {";"},
  };
  for (const auto& words : hostile) {
    std::string shown;
    for (const auto& w : words) shown += "[" + w + "]";
    EXPECT_FALSE(ParseDaemonCommand(words).ok()) << shown;
  }
  EXPECT_FALSE(ParseDaemonCommand({"orted", std::string(kMaxDaemonCommandBytes, 'a')}).ok());
  EXPECT_FALSE(ParseDaemonCommand(std::vector<std::string>(kMaxDaemonWords + 1, "orted")).ok());
  // Quoted, the operators are only characters of an argument (no shell ever sees them).
  auto quoted = ParseDaemonCommand({"orted", "-mca", "x", "'a;b|c'"});
  ASSERT_TRUE(quoted.ok()) << quoted.status().ToString();
  EXPECT_EQ(quoted->args.back(), "a;b|c");
}

TEST(RshProtocolTest, FramesRoundTripInPieces) {
  std::string wire = EncodeFrame(FrameType::kOutput, "hello\n") +
                     EncodeFrame(FrameType::kKeepalive, "") + EncodeFrame(FrameType::kExit, "3");
  FrameDecoder d;
  std::vector<Frame> got;
  for (char c : wire) {  // one byte at a time: frames span reads
    d.Feed(&c, 1);
    while (true) {
      auto f = d.Next();
      ASSERT_TRUE(f.ok());
      if (!*f) break;
      got.push_back(**f);
    }
  }
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].type, FrameType::kOutput);
  EXPECT_EQ(got[0].payload, "hello\n");
  EXPECT_EQ(got[1].type, FrameType::kKeepalive);
  EXPECT_EQ(got[2].type, FrameType::kExit);
  EXPECT_EQ(got[2].payload, "3");

  FrameDecoder bad;
  bad.Feed("HTTP/1.1 200", 12);
  EXPECT_FALSE(bad.Next().ok());
  FrameDecoder huge;
  const char big[] = {'o', 0x7f, 0, 0, 0};
  huge.Feed(big, sizeof big);
  EXPECT_FALSE(huge.Next().ok());
}

}  // namespace
}  // namespace agent
