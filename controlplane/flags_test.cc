#include "controlplane/flags.h"

#include <gtest/gtest.h>

namespace controlplane {
namespace {

TEST(ServerFlagsTest, ParsesEveryFlag) {
  auto o = ParseServerFlags({"--listen", "0.0.0.0:8080", "--db", "host=x", "--data-dir", "/d",
                             "--port-file", "/p", "--bootstrap-out", "/b",
                             "--heartbeat-interval-ms=250", "--max-nodes-per-job", "8",
                             "--max-ranks-per-job", "32", "--advertise", "10.0.0.5:8080",
                             "--preempt-min-priority", "90", "--preempt-grace-ms", "5000",
                             "--fair-share-half-life-s", "3600", "--max-reservations", "4"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->listen_host, "0.0.0.0");
  EXPECT_EQ(o->listen_port, 8080);
  EXPECT_EQ(o->db, "host=x");
  EXPECT_EQ(o->data_dir, "/d");
  EXPECT_EQ(o->port_file, "/p");
  EXPECT_EQ(o->bootstrap_out, "/b");
  EXPECT_EQ(o->heartbeat_interval_ms, 250);
  EXPECT_EQ(o->limits.max_nodes, 8);
  EXPECT_EQ(o->limits.max_ranks, 32);
  EXPECT_EQ(o->advertise, "10.0.0.5:8080");
  EXPECT_EQ(o->preempt_min_priority, 90);
  EXPECT_EQ(o->preempt_grace_ms, 5000);
  EXPECT_EQ(o->fair_share_half_life_s, 3600);
  EXPECT_EQ(o->max_reservations, 4);
}

TEST(ServerFlagsTest, ImageRegistriesAreRepeatedNameUrlPairs) {
  auto none = ParseServerFlags({"--listen", "127.0.0.1:0", "--db", "x", "--data-dir", "d"});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->image_registries.empty());
  auto two = ParseServerFlags({"--listen", "127.0.0.1:0", "--db", "x", "--data-dir", "d",
                               "--image-registry", "local=http://127.0.0.1:5000",
                               "--image-registry=hub=https://registry.example.com"});
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  ASSERT_EQ(two->image_registries.size(), 2u);
  EXPECT_EQ(two->image_registries[0].name, "local");
  EXPECT_FALSE(two->image_registries[0].tls_verify);
  EXPECT_EQ(two->image_registries[1].host, "registry.example.com");
  EXPECT_TRUE(two->image_registries[1].tls_verify);
  for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
           {"--image-registry", "local"},
           {"--image-registry", "local=ftp://x"},
           {"--image-registry", "a=https://x", "--image-registry", "a=https://y"},
           {"--image-registry", "a=https://x", "--image-registry", "b=https://x"}}) {
    std::vector<std::string> args{"--listen", "127.0.0.1:0", "--db", "x", "--data-dir", "d"};
    args.insert(args.end(), bad.begin(), bad.end());
    auto r = ParseServerFlags(args);
    ASSERT_FALSE(r.ok()) << bad.back();
    EXPECT_EQ(r.status().field(), "--image-registry") << r.status().ToString();
  }
  EXPECT_NE(ServerUsage().find("--image-registry"), std::string::npos);
}

TEST(ServerFlagsTest, TlsTakesACertificateAndItsKeyTogether) {
  auto plain = ParseServerFlags({"--listen", "127.0.0.1:0", "--db", "x", "--data-dir", "d"});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->tls_cert, "");
  EXPECT_EQ(plain->tls_key, "");
  auto tls = ParseServerFlags({"--listen", "127.0.0.1:0", "--db", "x", "--data-dir", "d",
                               "--tls-cert", "/etc/embody/server.pem", "--tls-key=/etc/k.pem"});
  ASSERT_TRUE(tls.ok()) << tls.status().ToString();
  EXPECT_EQ(tls->tls_cert, "/etc/embody/server.pem");
  EXPECT_EQ(tls->tls_key, "/etc/k.pem");
  auto no_key = ParseServerFlags(
      {"--listen", "127.0.0.1:0", "--db", "x", "--data-dir", "d", "--tls-cert", "/c.pem"});
  ASSERT_FALSE(no_key.ok());
  EXPECT_EQ(no_key.status().field(), "--tls-key");
  auto no_cert = ParseServerFlags(
      {"--listen", "127.0.0.1:0", "--db", "x", "--data-dir", "d", "--tls-key", "/k.pem"});
  ASSERT_FALSE(no_cert.ok());
  EXPECT_EQ(no_cert.status().field(), "--tls-cert");
  EXPECT_NE(ServerUsage().find("--tls-cert"), std::string::npos);
}

TEST(ServerFlagsTest, DatabaseTimeoutsHaveDefaultsAndBounds) {
  auto d = ParseServerFlags({"--listen", "127.0.0.1:0", "--db", "x", "--data-dir", "d"});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->db_connect_timeout_s, 5);
  EXPECT_EQ(d->db_statement_timeout_ms, 30000);
  EXPECT_EQ(d->db_lock_timeout_ms, 10000);
  auto o = ParseServerFlags({"--listen", "127.0.0.1:0", "--db", "x", "--data-dir", "d",
                             "--db-connect-timeout-s", "2", "--db-keepalives-idle-s", "7",
                             "--db-keepalives-interval-s", "3", "--db-keepalives-count", "4",
                             "--db-statement-timeout-ms", "0", "--db-lock-timeout-ms", "250"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->db_connect_timeout_s, 2);
  EXPECT_EQ(o->db_keepalives_idle_s, 7);
  EXPECT_EQ(o->db_keepalives_interval_s, 3);
  EXPECT_EQ(o->db_keepalives_count, 4);
  EXPECT_EQ(o->db_statement_timeout_ms, 0);
  EXPECT_EQ(o->db_lock_timeout_ms, 250);
  // A connect with no timeout would hang a request for as long as the network does.
  auto zero = ParseServerFlags({"--listen", "127.0.0.1:0", "--db", "x", "--data-dir", "d",
                                "--db-connect-timeout-s", "0"});
  EXPECT_EQ(zero.status().field(), "--db-connect-timeout-s");
}

TEST(ServerFlagsTest, WebDirDefaultsToTheBuiltDashboard) {
  auto o = ParseServerFlags({"--listen", "127.0.0.1:0", "--db", "x", "--data-dir", "d"});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->web_dir, DefaultWebDir());
  EXPECT_FALSE(o->web_dir.empty());
  auto set = ParseServerFlags(
      {"--listen", "127.0.0.1:0", "--db", "x", "--data-dir", "d", "--web-dir", "/srv/web"});
  ASSERT_TRUE(set.ok());
  EXPECT_EQ(set->web_dir, "/srv/web");
}

TEST(ServerFlagsTest, PortZeroMeansAnyPort) {
  auto o = ParseServerFlags({"--listen", "127.0.0.1:0", "--db", "x", "--data-dir", "d"});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->listen_port, 0);
}

TEST(ServerFlagsTest, RejectsBadInputNamingTheFlag) {
  auto missing = ParseServerFlags({"--listen", "127.0.0.1:0", "--data-dir", "d"});
  EXPECT_EQ(missing.status().field(), "--db");
  auto bad_port = ParseServerFlags({"--listen", "127.0.0.1:99999", "--db", "x", "--data-dir", "d"});
  EXPECT_EQ(bad_port.status().field(), "--listen");
  auto bad_advertise = ParseServerFlags(
      {"--listen", "127.0.0.1:0", "--db", "x", "--data-dir", "d", "--advertise", "host"});
  EXPECT_EQ(bad_advertise.status().field(), "--advertise");
  auto unknown = ParseServerFlags({"--bogus", "1"});
  EXPECT_EQ(unknown.status().field(), "--bogus");
  auto no_value = ParseServerFlags({"--listen"});
  EXPECT_FALSE(no_value.ok());
  auto not_int = ParseServerFlags(
      {"--listen", "h:1", "--db", "x", "--data-dir", "d", "--heartbeat-interval-ms", "fast"});
  EXPECT_EQ(not_int.status().field(), "--heartbeat-interval-ms");
}

}  // namespace
}  // namespace controlplane

namespace controlplane {
namespace {

// --help is printed from the same table the parser reads: every flag is in it, with its default.
TEST(ServerFlagsTest, UsageListsEveryFlagWithItsDefault) {
  const std::string usage = ServerUsage();
  for (const char* flag :
       {"--listen", "--db", "--data-dir", "--port-file", "--bootstrap-out", "--web-dir",
        "--heartbeat-interval-ms", "--max-nodes-per-job", "--max-ranks-per-job",
        "--scheduler-period-ms", "--db-pool-size", "--rate-limit-per-s", "--rate-limit-burst",
        "--preempt-min-priority", "--preempt-grace-ms", "--fair-share-half-life-s",
        "--max-reservations", "--audit", "--advertise", "--db-connect-timeout-s",
        "--db-keepalives-idle-s", "--db-keepalives-interval-s", "--db-keepalives-count",
        "--db-statement-timeout-ms", "--db-lock-timeout-ms"}) {
    EXPECT_NE(usage.find(flag), std::string::npos) << flag << "\n" << usage;
  }
  EXPECT_NE(usage.find("30000"), std::string::npos) << usage;  // --preempt-grace-ms
  EXPECT_NE(usage.find("86400"), std::string::npos) << usage;  // --fair-share-half-life-s
}

TEST(ServerFlagsTest, NumbersAreStrict) {
  const std::vector<std::string> base = {"--listen", "h:1", "--db", "x", "--data-dir", "d"};
  for (const char* bad : {" 250", "250 ", "+250", "0x10", "1e3", "49", "600001",
                          "99999999999999999999"}) {
    auto args = base;
    args.push_back("--heartbeat-interval-ms");
    args.push_back(bad);
    auto r = ParseServerFlags(args);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().field(), "--heartbeat-interval-ms") << bad;
  }
  for (const char* listen : {"h:+1", "h: 1", "h:0x10", "h:", ":80"}) {
    auto r = ParseServerFlags({"--listen", listen, "--db", "x", "--data-dir", "d"});
    EXPECT_EQ(r.status().field(), "--listen") << listen;
  }
  auto audit = ParseServerFlags({"--listen", "h:1", "--db", "x", "--data-dir", "d", "--audit=0"});
  ASSERT_TRUE(audit.ok()) << audit.status().ToString();
  EXPECT_FALSE(audit->audit);
  EXPECT_EQ(ParseServerFlags({"--listen", "h:1", "--db", "x", "--data-dir", "d", "--audit", "2"})
                .status()
                .field(),
            "--audit");
  EXPECT_FALSE(ParseServerFlags({"--listen", "h:1", "--db", "x", "--data-dir", "d", "stray"}).ok());
}

}  // namespace
}  // namespace controlplane
