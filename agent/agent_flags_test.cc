#include "agent/agent_flags.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "common/crypto.h"
#include "common/file_util.h"

namespace agent {
namespace {

TEST(TokenFileTest, PlainTokenWithWhitespace) {
  auto t = ParseTokenFile("  abc123\n");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, "abc123");
}

TEST(TokenFileTest, BootstrapJson) {
  auto t = ParseTokenFile(R"({"admin_token":"a","agent_token":"xyz","tenant":"default"})");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, "xyz");
}

TEST(TokenFileTest, Rejects) {
  EXPECT_FALSE(ParseTokenFile("").ok());
  EXPECT_FALSE(ParseTokenFile(" \n").ok());
  EXPECT_FALSE(ParseTokenFile(R"({"admin_token":"a"})").ok());
  EXPECT_FALSE(ParseTokenFile(R"({"agent_token":3})").ok());
  EXPECT_FALSE(ParseTokenFile("{not json").ok());
  EXPECT_FALSE(ParseTokenFile("two words").ok());
}

TEST(AgentFlagsTest, ParsesEverything) {
  auto c = ParseAgentFlags({"--server",
                            "http://127.0.0.1:8080",
                            "--token=t0k",
                            "--name",
                            "n1",
                            "--data-dir",
                            "/tmp/d",
                            "--listen",
                            "0.0.0.0:7070",
                            "--address",
                            "10.0.0.5",
                            "--slots",
                            "8",
                            "--engine",
                            "/e",
                            "--mpirun",
                            "/m",
                            "--port-file",
                            "/tmp/p",
                            "--kill-grace-ms",
                            "250",
                            "--orphan-grace-ms",
                            "1500",
                            "--verbose"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "http://127.0.0.1:8080");
  EXPECT_EQ(c->token, "t0k");
  EXPECT_EQ(c->name, "n1");
  EXPECT_EQ(c->data_dir, "/tmp/d");
  EXPECT_EQ(c->listen_host, "0.0.0.0");
  EXPECT_EQ(c->listen_port, 7070);
  EXPECT_EQ(c->address, "10.0.0.5");
  EXPECT_EQ(c->slots, 8);
  EXPECT_EQ(c->engine, "/e");
  EXPECT_EQ(c->mpirun, "/m");
  EXPECT_EQ(c->port_file, "/tmp/p");
  EXPECT_EQ(c->kill_grace.count(), 250);
  EXPECT_EQ(c->orphan_grace.count(), 1500);
  EXPECT_TRUE(c->verbose);
}

TEST(AgentFlagsTest, DefaultsAndTokenFile) {
  char dir[] = "/tmp/agent_flags_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string file = std::string(dir) + "/token.json";
  ASSERT_TRUE(common::WriteFileAtomic(file, R"({"agent_token": "from-file"})").ok());
  auto c = ParseAgentFlags({"--server", "http://s", "--token-file", file, "--data-dir", "d"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->token, "from-file");
  EXPECT_EQ(c->listen_host, "127.0.0.1");
  EXPECT_EQ(c->listen_port, 0);
  EXPECT_EQ(c->address, "127.0.0.1");
  EXPECT_EQ(c->mpirun, "mpirun");
  EXPECT_EQ(c->kill_grace.count(), 5000);
  EXPECT_FALSE(c->name.empty());  // host name
  EXPECT_NE(c->engine.find("/embody-engine"), std::string::npos);
  std::filesystem::remove_all(dir);
}

// Registry credentials are used only from a file no one else can read.
TEST(AgentFlagsTest, TheRegistryAuthFileIsTheAgentsAlone) {
  char dir[] = "/tmp/agent_flags_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string auth = std::string(dir) + "/auth.json";
  ASSERT_TRUE(common::WriteFileAtomic(auth, R"({"auths": {}})", 0600).ok());
  const std::vector<std::string> base{"--server", "http://s", "--token", "t", "--data-dir", "d"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> args = base;
    args.insert(args.end(), more.begin(), more.end());
    return ParseAgentFlags(args);
  };
  auto c = with({"--image-registry-auth", auth, "--image-pull-timeout-s", "60"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->image_registry_auth, auth);
  EXPECT_EQ(c->image_pull_timeout_s, 60);
  EXPECT_EQ(c->skopeo, "skopeo");
  ASSERT_EQ(::chmod(auth.c_str(), 0644), 0);
  EXPECT_EQ(with({"--image-registry-auth", auth}).status().field(), "image-registry-auth");
  EXPECT_EQ(with({"--image-registry-auth", std::string(dir) + "/missing"}).status().field(),
            "image-registry-auth");
  EXPECT_EQ(with({"--image-registry-auth", "auth.json"}).status().field(), "image-registry-auth");
  EXPECT_FALSE(with({"--image-pull-timeout-s", "1"}).ok());
  std::filesystem::remove_all(dir);
}

TEST(AgentFlagsTest, Errors) {
  EXPECT_FALSE(ParseAgentFlags({"--token", "t", "--data-dir", "d"}).ok());   // no server
  EXPECT_FALSE(ParseAgentFlags({"--server", "s", "--data-dir", "d"}).ok());  // no token
  EXPECT_FALSE(ParseAgentFlags({"--server", "s", "--token", "t"}).ok());     // no data dir
  EXPECT_FALSE(
      ParseAgentFlags({"--server", "s", "--token", "t", "--data-dir", "d", "--bogus", "1"}).ok());
  EXPECT_FALSE(
      ParseAgentFlags({"--server", "s", "--token", "t", "--data-dir", "d", "--slots", "x"}).ok());
  EXPECT_FALSE(
      ParseAgentFlags({"--server", "s", "--token", "t", "--data-dir", "d", "--listen", "7070"})
          .ok());
  EXPECT_FALSE(ParseAgentFlags({"--server", "s", "--token", "t", "--data-dir", "d", "--token-file",
                                "/nonexistent/x"})
                   .ok());
  auto missing = ParseAgentFlags({"--server"});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().field(), "server");
}

TEST(AgentFlagsTest, MetricsTokenFileIsKeptOnlyAsItsDigest) {
  char dir[] = "/tmp/agent_flags_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string d(dir);
  auto parse = [&](const std::string& contents) {
    EXPECT_TRUE(common::WriteFileAtomic(d + "/metrics.token", contents).ok());
    return ParseAgentFlags({"--server", "http://s", "--token", "join-token-0123456789",
                            "--data-dir", "d", "--metrics-token-file", d + "/metrics.token"});
  };
  auto c = parse("  scrape-secret-0123456789\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->metrics_token_sha256, common::Sha256Hex("scrape-secret-0123456789"));
  EXPECT_EQ(c->metrics_token_file, d + "/metrics.token");

  // Without the flag there is no secret: every scrape gets the public series only.
  auto none = ParseAgentFlags({"--server", "http://s", "--token", "t", "--data-dir", "d"});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->metrics_token_sha256.empty());

  for (const char* bad : {"", " \n", "two words-0123456789", "short-secret",
                          R"({"admin_token": "0123456789abcdef0123"})", "join-token-0123456789"}) {
    auto r = parse(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().field(), "metrics-token-file") << bad;
  }
  auto missing = ParseAgentFlags({"--server", "http://s", "--token", "t", "--data-dir", "d",
                                  "--metrics-token-file", d + "/none"});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().field(), "metrics-token-file");
  std::filesystem::remove_all(dir);
}

// --help is printed from the table the parser reads: every flag is in it, with its default.
TEST(AgentFlagsTest, UsageListsEveryFlagAndTheSubcommand) {
  const std::string usage = AgentUsage();
  for (const char* flag : {"--server",
                           "--token",
                           "--token-file",
                           "--data-dir",
                           "--name",
                           "--listen",
                           "--address",
                           "--slots",
                           "--engine",
                           "--mpirun",
                           "--port-file",
                           "--kill-grace-ms",
                           "--orphan-grace-ms",
                           "--nvml-library",
                           "--verbose",
                           "--job-uid-base",
                           "--job-uid-count",
                           "--tenant-gid-base",
                           "--tenant-gid-count",
                           "--run-jobs-as-agent",
                           "--job-max-processes",
                           "--job-max-open-files",
                           "--no-cgroups",
                           "--no-held-heartbeats",
                           "--job-path",
                           "--metrics-token-file",
                           "exec-rank"}) {
    EXPECT_NE(usage.find(flag), std::string::npos) << flag << "\n" << usage;
  }
  for (const char* shown :
       {"200000", "65536", "10000000", "4096", "5000", "/usr/local/bin:/usr/bin:/bin"}) {
    EXPECT_NE(usage.find(shown), std::string::npos) << shown << "\n" << usage;
  }
}

TEST(AgentFlagsTest, NumbersAreStrictAndErrorsNameTheFlag) {
  const std::vector<std::string> base = {"--server", "http://s", "--token", "t", "--data-dir", "d"};
  struct Case {
    const char* flag;
    const char* value;
  } cases[] = {{"--slots", " 8"},           {"--slots", "8 "},
               {"--slots", "+8"},           {"--slots", "0x10"},
               {"--slots", "0"},            {"--slots", "99999999999999999999"},
               {"--kill-grace-ms", "1e3"},  {"--job-uid-base", "999"},
               {"--orphan-grace-ms", "-1"},
               {"--job-max-processes", "-1"}, {"--listen", "h:+80"},
               {"--listen", "h:65536"}};
  for (const auto& c : cases) {
    auto args = base;
    args.push_back(c.flag);
    args.push_back(c.value);
    auto r = ParseAgentFlags(args);
    ASSERT_FALSE(r.ok()) << c.flag << " " << c.value;
    EXPECT_EQ(r.status().field(), std::string(c.flag).substr(2)) << c.flag << " " << c.value;
  }
  auto unknown = ParseAgentFlags({"--server", "s", "--bogus=1"});
  EXPECT_EQ(unknown.status().field(), "bogus");
  EXPECT_FALSE(ParseAgentFlags({"--server", "http://s", "--token", "t", "--data-dir", "d", "x"}).ok());
  auto flags = ParseAgentFlags({"--server", "http://s", "--token", "t", "--data-dir", "d",
                                "--no-cgroups", "--run-jobs-as-agent", "--job-uid-base=300000",
                                "--no-held-heartbeats"});
  ASSERT_TRUE(flags.ok()) << flags.status().ToString();
  EXPECT_TRUE(flags->no_cgroups);
  EXPECT_TRUE(flags->no_held_heartbeats);
  EXPECT_TRUE(flags->run_jobs_as_agent);
  EXPECT_FALSE(flags->verbose);
  EXPECT_EQ(flags->job_uid_base, 300000);
}

TEST(AgentFlagsTest, JobNetworkIsConfinedOrHost) {
  const std::vector<std::string> base = {"--server", "http://s", "--token", "t", "--data-dir", "d"};
  auto parse = [&](std::vector<std::string> extra) {
    auto args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return ParseAgentFlags(args);
  };
  auto unset = parse({});
  ASSERT_TRUE(unset.ok());
  EXPECT_EQ(unset->job_network, "");  // the agent decides at start (root or not)
  EXPECT_EQ(unset->nft, "nft");
  auto confined = parse({"--job-network", "confined", "--nft", "/usr/sbin/nft"});
  ASSERT_TRUE(confined.ok()) << confined.status().ToString();
  EXPECT_EQ(confined->job_network, "confined");
  EXPECT_EQ(confined->nft, "/usr/sbin/nft");
  auto host = parse({"--job-network=host"});
  ASSERT_TRUE(host.ok());
  EXPECT_EQ(host->job_network, "host");
  for (const char* bad : {"none", "", "Confined", "host;"}) {
    auto r = parse({"--job-network", bad});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().field(), "job-network") << bad;
  }
}

TEST(AgentFlagsTest, TlsFlagsAndTheCaFile) {
  const std::vector<std::string> base = {
      "--server", "https://ctl.example:8443", "--token", "t", "--data-dir", "d"};
  auto parse = [&](std::vector<std::string> extra) {
    auto args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return ParseAgentFlags(args);
  };
  auto plain = parse({});
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->server, "https://ctl.example:8443");
  EXPECT_EQ(plain->tls_cert, "");
  EXPECT_EQ(plain->ca_file, "");
  auto tls = parse({"--tls-cert", "/etc/embody/node.pem", "--tls-key=/etc/embody/node.key",
                    "--ca-file", "/etc/embody/ca.pem"});
  ASSERT_TRUE(tls.ok()) << tls.status().ToString();
  EXPECT_EQ(tls->tls_cert, "/etc/embody/node.pem");
  EXPECT_EQ(tls->tls_key, "/etc/embody/node.key");
  EXPECT_EQ(tls->ca_file, "/etc/embody/ca.pem");
  auto no_key = parse({"--tls-cert", "/c.pem"});
  ASSERT_FALSE(no_key.ok());
  EXPECT_EQ(no_key.status().field(), "tls-key");
  auto no_cert = parse({"--tls-key", "/k.pem"});
  ASSERT_FALSE(no_cert.ok());
  EXPECT_EQ(no_cert.status().field(), "tls-cert");
  // mpirun's launcher command carries the CA file's path, split on whitespace.
  auto spaced = parse({"--ca-file", "/etc/my ca.pem"});
  ASSERT_FALSE(spaced.ok());
  EXPECT_EQ(spaced.status().field(), "ca-file");
  auto ftp = ParseAgentFlags({"--server", "ftp://s", "--token", "t", "--data-dir", "d"});
  ASSERT_FALSE(ftp.ok());
  EXPECT_EQ(ftp.status().field(), "server");
  for (const char* flag : {"--tls-cert", "--tls-key", "--ca-file"}) {
    EXPECT_NE(AgentUsage().find(flag), std::string::npos) << flag;
  }
}

// Tenant groups: a job's gid is its uid, so the two ranges must never meet.
TEST(AgentFlagsTest, TenantGroupsStayApartFromJobUids) {
  const std::vector<std::string> base = {"--server", "http://s", "--token", "t", "--data-dir", "d"};
  auto parse = [&](std::vector<std::string> extra) {
    auto args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return ParseAgentFlags(args);
  };
  auto defaults = parse({});
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  EXPECT_EQ(defaults->tenant_gid_base, 10000000);
  EXPECT_EQ(defaults->tenant_gid_count, 65536);
  auto set = parse({"--tenant-gid-base", "300000", "--tenant-gid-count=1000"});
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->tenant_gid_base, 300000);
  EXPECT_EQ(set->tenant_gid_count, 1000);
  // Just below and just above the job uids [200000, 265536) are fine; touching them is not.
  EXPECT_TRUE(parse({"--tenant-gid-base", "100000", "--tenant-gid-count", "100000"}).ok());
  EXPECT_TRUE(parse({"--tenant-gid-base", "265536"}).ok());
  for (const std::vector<std::string>& meets :
       {std::vector<std::string>{"--tenant-gid-base", "265535"},
        {"--tenant-gid-base", "100000", "--tenant-gid-count", "100001"},
        {"--tenant-gid-base", "210000", "--tenant-gid-count", "2"},
        {"--job-uid-base", "10000100", "--job-uid-count", "10"}}) {
    auto r = parse(meets);
    ASSERT_FALSE(r.ok()) << meets[1];
    EXPECT_EQ(r.status().field(), "tenant-gid-base");
    EXPECT_NE(r.status().message().find("meet the job uids"), std::string::npos)
        << r.status().message();
  }
  for (const std::vector<std::string>& bad : {std::vector<std::string>{"--tenant-gid-base", "999"},
                                              {"--tenant-gid-count", "1"},
                                              {"--tenant-gid-count", "x"}}) {
    auto r = parse(bad);
    ASSERT_FALSE(r.ok()) << bad[1];
    EXPECT_EQ(r.status().field(), bad[0].substr(2));
  }
  auto far = parse({"--tenant-gid-base", "1999999000", "--tenant-gid-count", "1001"});
  ASSERT_FALSE(far.ok());
  EXPECT_EQ(far.status().field(), "tenant-gid-count");
}

}  // namespace
}  // namespace agent
