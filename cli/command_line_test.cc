#include "cli/command_line.h"

#include <gtest/gtest.h>

#include <sstream>

#include "cli/dataset_format.h"
#include "cli/requests.h"

namespace cli {
namespace {

struct Outcome {
  std::optional<Invocation> inv;
  int code = -1;
  std::string out, err;
};

Outcome Parse(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  auto r = ParseCommandLine(args, out, err);
  Outcome o;
  o.out = out.str();
  o.err = err.str();
  if (auto* inv = std::get_if<Invocation>(&r)) {
    o.inv = *inv;
  } else {
    o.code = std::get<int>(r);
  }
  return o;
}

TEST(CommandLineTest, CaFileIsAnOptionOfEveryCommand) {
  Outcome o = Parse({"--ca-file", "/etc/embody/ca.pem", "ls"});
  ASSERT_TRUE(o.inv) << o.err;
  EXPECT_EQ(o.inv->command, "ls");
  EXPECT_EQ(o.inv->ca_file, "/etc/embody/ca.pem");
  o = Parse({"whoami"});
  ASSERT_TRUE(o.inv) << o.err;
  EXPECT_EQ(o.inv->ca_file, "");
  EXPECT_NE(Parse({"--help"}).out.find("--ca-file"), std::string::npos);
}

TEST(CommandLineTest, ListsAndShowsTakeOutputJson) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"ls", "-o", "json"},
                                             {"show", "7", "--output", "json"},
                                             {"events", "7", "-o", "json"},
                                             {"metrics", "7", "-o", "json"},
                                             {"eval", "7", "-o", "json"},
                                             {"nodes", "-o", "json"},
                                             {"tenants", "-o", "json"},
                                             {"tenants", "show", "2", "-o", "json"},
                                             {"tokens", "ls", "-o", "json"},
                                             {"whoami", "-o", "json"},
                                             {"audit", "-o", "json"}}) {
    Outcome o = Parse(args);
    ASSERT_TRUE(o.inv) << args[0] << ": " << o.err;
    EXPECT_TRUE(o.inv->json) << args[0];
  }
  Outcome table = Parse({"tenants"});
  ASSERT_TRUE(table.inv);
  EXPECT_FALSE(table.inv->json);
  EXPECT_EQ(table.inv->command, "tenants");
}

TEST(CommandLineTest, NestedCommandsAndTheirValues) {
  Outcome o = Parse({"tenants", "create", "robotics", "--weight", "2.5", "--quota-slots", "64",
                     "--quota-pending-jobs", "none"});
  ASSERT_TRUE(o.inv) << o.err;
  EXPECT_EQ(o.inv->command, "tenants create");
  EXPECT_EQ(o.inv->name, "robotics");
  ASSERT_TRUE(o.inv->weight);
  EXPECT_EQ(*o.inv->weight, 2.5);
  EXPECT_EQ(o.inv->quota, (std::map<std::string, std::optional<int64_t>>{
                              {"slots", 64}, {"pending_jobs", std::nullopt}}));
  EXPECT_EQ(TenantBody(*o.inv).dump(),
            R"({"name":"robotics","quota":{"pending_jobs":null,"slots":64},"weight":2.5})");

  o = Parse({"tenants", "set", "3", "--quota-running-jobs", "4", "--if-version", "9"});
  ASSERT_TRUE(o.inv) << o.err;
  EXPECT_EQ(o.inv->command, "tenants set");
  EXPECT_EQ(o.inv->id, 3);
  EXPECT_FALSE(o.inv->weight);
  EXPECT_EQ(o.inv->if_match, 9);
  EXPECT_EQ(TenantBody(*o.inv).dump(), R"({"quota":{"running_jobs":4}})");

  // The storage quota is given in GiB and sent in bytes; "none" lifts it.
  o = Parse({"tenants", "set", "3", "--quota-storage-gib", "10"});
  ASSERT_TRUE(o.inv) << o.err;
  EXPECT_EQ(TenantBody(*o.inv).dump(), R"({"quota":{"storage_bytes":10737418240}})");
  o = Parse({"tenants", "create", "lab", "--quota-storage-gib", "none"});
  ASSERT_TRUE(o.inv) << o.err;
  EXPECT_EQ(TenantBody(*o.inv).dump(), R"({"name":"lab","quota":{"storage_bytes":null}})");

  o = Parse({"tokens", "create", "--role", "member", "--name", "ci bot", "--tenant", "2",
             "--expires", "2027-01-01T00:00:00Z"});
  ASSERT_TRUE(o.inv) << o.err;
  EXPECT_EQ(o.inv->command, "tokens create");
  EXPECT_EQ(
      TokenBody(*o.inv).dump(),
      R"({"expires_at":"2027-01-01T00:00:00Z","name":"ci bot","role":"member","tenant_id":2})");
  // Prometheus's token (docs/tenancy.md): service discovery and tenant series only.
  auto mon = Parse({"tokens", "create", "--role", "monitoring", "--name", "prometheus"});
  ASSERT_TRUE(mon.inv) << mon.err;
  EXPECT_EQ(TokenBody(*mon.inv).dump(), R"({"name":"prometheus","role":"monitoring"})");
  o = Parse({"tokens", "create", "--role", "viewer", "--name", "x"});
  ASSERT_TRUE(o.inv);
  EXPECT_EQ(TokenBody(*o.inv).dump(), R"({"name":"x","role":"viewer"})");

  o = Parse({"nodes", "drain", "4"});
  ASSERT_TRUE(o.inv) << o.err;
  EXPECT_EQ(o.inv->command, "nodes drain");
  EXPECT_EQ(o.inv->id, 4);

  o = Parse({"audit", "--all", "--limit", "20"});
  ASSERT_TRUE(o.inv);
  EXPECT_TRUE(o.inv->all);
  EXPECT_EQ(o.inv->limit, 20);

  o = Parse({"logs", "5", "-f", "--rank", "-1"});
  ASSERT_TRUE(o.inv) << o.err;
  EXPECT_TRUE(o.inv->follow);
  EXPECT_EQ(o.inv->rank, -1);
  o = Parse({"logs", "5"});
  ASSERT_TRUE(o.inv);
  EXPECT_FALSE(o.inv->rank);
  EXPECT_FALSE(o.inv->attempt);
  o = Parse({"logs", "5", "--attempt", "1"});
  ASSERT_TRUE(o.inv) << o.err;
  EXPECT_EQ(o.inv->attempt, 1);
  EXPECT_FALSE(Parse({"logs", "5", "--attempt", "-1"}).inv);
}

TEST(CommandLineTest, DatasetsImportTakesALerobotDirectory) {
  Outcome o = Parse({"datasets", "import", "pusht", "/d/pusht", "--format", "lerobot", "--resize",
                     "96x128", "--language", "push the T"});
  ASSERT_TRUE(o.inv) << o.err;
  EXPECT_EQ(o.inv->command, "datasets import");
  const DatasetImportFlags flags{o.inv->format, o.inv->filter, o.inv->language, o.inv->nan,
                                 o.inv->resize};
  EXPECT_EQ(DatasetImportBody(o.inv->name, o.inv->path, flags),
            nlohmann::json::parse(R"({"name": "pusht", "source": {"format": "lerobot",
                "path": "/d/pusht", "resize": "96x128", "language": "push the T"}})"));
  // Without --format it is an HDF5 file, as before.
  o = Parse({"datasets", "import", "lift", "/d/lift.hdf5", "--filter", "train"});
  ASSERT_TRUE(o.inv) << o.err;
  EXPECT_EQ(DatasetImportBody(o.inv->name, o.inv->path, {o.inv->format, o.inv->filter}),
            nlohmann::json::parse(R"({"name": "lift", "source": {"format": "hdf5",
                "path": "/d/lift.hdf5", "filter": "train"}})"));
  EXPECT_EQ(Parse({"datasets", "import", "x", "/d", "--format", "parquet"}).code, kExitUsage);
}

TEST(CommandLineTest, DatasetsPullNamesARegistryAndAReference) {
  Outcome o = Parse({"datasets", "pull", "torch-env", "local/embody/torch:2.1"});
  ASSERT_TRUE(o.inv) << o.err;
  EXPECT_EQ(o.inv->command, "datasets pull");
  EXPECT_EQ(DatasetPullBody(o.inv->name, o.inv->path),
            nlohmann::json::parse(R"({"name": "torch-env", "source": {"format": "oci",
                "registry": "local", "reference": "embody/torch:2.1"}})"));
  EXPECT_EQ(DatasetPullBody("x", "127.0.0.1:5000/x@sha256:ab")["source"]["registry"],
            "127.0.0.1:5000");
  EXPECT_EQ(DatasetPullBody("x", "noslash")["source"]["reference"], "");
  EXPECT_EQ(Parse({"datasets", "pull", "x"}).code, kExitUsage);
}

TEST(CommandLineTest, DatasetsUploadTakesALerobotDirectory) {
  Outcome o = Parse({"datasets", "upload", "pusht", "./pusht", "--format", "lerobot", "--resize",
                     "96x128", "--resume", "7"});
  ASSERT_TRUE(o.inv) << o.err;
  EXPECT_EQ(o.inv->command, "datasets upload");
  EXPECT_EQ(o.inv->format, "lerobot");
  EXPECT_EQ(o.inv->resize, "96x128");
  EXPECT_EQ(o.inv->resume, 7);
  o = Parse({"datasets", "upload", "lift", "lift.hdf5"});
  ASSERT_TRUE(o.inv) << o.err;
  EXPECT_EQ(o.inv->format, "hdf5");
  EXPECT_EQ(Parse({"datasets", "upload", "x", "d", "--format", "zip"}).code, kExitUsage);
}

TEST(CommandLineTest, UsageErrorsExitTwoAndSayWhy) {
  struct Case {
    std::vector<std::string> args;
    const char* says;
  };
  for (const Case& c : std::vector<Case>{
           {{}, "A subcommand is required"},
           {{"frobnicate"}, "frobnicate"},
           {{"show"}, "ID is required"},
           {{"show", "abc"}, "ID"},
           {{"show", "0"}, "ID"},
           {{"ls", "-o", "yaml"}, "yaml"},
           {{"ls", "--limit", "0"}, "--limit"},
           {{"tenants", "create"}, "NAME is required"},
           {{"tenants", "create", "x", "--quota-slots", "-3"}, "non-negative integer or none"},
           {{"tenants", "set", "1", "--quota-storage-gib", "1.5"}, "whole GiB"},
           {{"tenants", "set", "1", "--quota-storage-gib", "1048577"}, "whole GiB"},
           {{"tenants", "create", "x", "--weight", "heavy"}, "--weight"},
           {{"tokens"}, "A subcommand is required"},
           {{"tokens", "create", "--name", "x"}, "--role is required"},
           {{"tokens", "create", "--role", "root", "--name", "x"}, "root"},
           {{"tokens", "revoke"}, "ID is required"},
           {{"nodes", "drain"}, "ID is required"},
           {{"whoami", "extra"}, "extra"},
       }) {
    Outcome o = Parse(c.args);
    std::string joined;
    for (const auto& a : c.args) joined += a + " ";
    EXPECT_FALSE(o.inv) << joined;
    EXPECT_EQ(o.code, kExitUsage) << joined;
    EXPECT_NE(o.err.find(c.says), std::string::npos) << joined << "\n" << o.err;
    EXPECT_NE(o.err.find("--help"), std::string::npos) << joined;
    EXPECT_EQ(o.out, "") << joined;
  }
}

TEST(CommandLineTest, HelpIsGeneratedFromTheFlagTable) {
  Outcome o = Parse({"--help"});
  EXPECT_EQ(o.code, 0);
  for (const char* cmd : {"ls", "submit", "tenants", "tokens", "whoami", "audit", "nodes",
                          "EMBODY_URL", "Exit status"}) {
    EXPECT_NE(o.out.find(cmd), std::string::npos) << cmd << "\n" << o.out;
  }
  o = Parse({"tenants", "set", "--help"});
  EXPECT_EQ(o.code, 0);
  for (const char* flag :
       {"--quota-slots", "--quota-running-jobs", "--quota-pending-jobs", "--quota-nodes-per-job",
        "--quota-storage-gib", "--weight", "--if-version", "--output"}) {
    EXPECT_NE(o.out.find(flag), std::string::npos) << flag << "\n" << o.out;
  }
}

TEST(RequestsTest, PathsEncodeTheirValues) {
  Invocation inv;
  inv.limit = 20;
  inv.state = "RUNNING&x=1";
  EXPECT_EQ(JobsPath(inv), "/v1/jobs?limit=20&state=RUNNING%26x%3D1");
  EXPECT_EQ(AuditPath(500, ""), "/v1/audit?limit=500");
  EXPECT_EQ(AuditPath(10, "123"), "/v1/audit?limit=10&cursor=123");
  EXPECT_EQ(QueryValue("2026-01-02T03:04:05Z"), "2026-01-02T03%3A04%3A05Z");
}

}  // namespace
}  // namespace cli
