// The `embody` CLI against an in-process embody-server, on both stores (server_test_fixture.h):
// tenants, tokens, whoami, audit and node drain as a person types them, with --output json
// checked against the response schemas of docs/api/openapi.yaml.
#include <gtest/gtest.h>

#include <sstream>

#include "cli/command_line.h"
#include "common/crypto.h"
#include "common/file_util.h"
#include "cli/commands.h"
#include "controlplane/service/fair_share_store.h"
#include "controlplane/testing/server_test_fixture.h"
#include "tests/support/documented_response.h"

namespace controlplane {
namespace {

using nlohmann::json;

struct CliRun {
  int code = -1;
  std::string out, err;
  json Json() const { return json::parse(out, nullptr, false); }
};

class CliServerTest : public ServerTest {
 protected:
  static void SetUpTestSuite() {
    // Every refusal of AuditFollowsPages is an audit row (no budget per address here).
    StartServer("cli", 1000, "", [](ServerOptions& o) { o.audit_anonymous_burst = 100'000; });
    const auto& doc = embody::testing::ApiDocument();
    ASSERT_TRUE(doc.ok()) << doc.status().ToString();
    doc_ = &*doc;
  }

  static CliRun Cli(const std::vector<std::string>& args, const std::string& token = Admin()) {
    std::ostringstream out, err;
    std::istringstream in;
    cli::Io io{out, err, in};
    io.config = [token]() -> common::Result<cli::Config> {
      return cli::Config{"http://127.0.0.1:" + std::to_string(server_->port()), token, "test",
                         /*ca_file=*/""};
    };
    CliRun r;
    r.code = cli::RunCli(args, io);
    r.out = out.str();
    r.err = err.str();
    return r;
  }

  // `value` follows the documented schema of `method path`'s `status` response.
  static void ExpectDocumented(const json& value, const std::string& method,
                               const std::string& path, int status = 200) {
    const auto errors = embody::testing::JsonResponseViolations(*doc_, method, path, status, value);
    std::string all;
    for (const auto& e : errors) all += "  " + e + "\n";
    EXPECT_TRUE(errors.empty()) << method << " " << path << " answered, against the document:\n"
                                << all << value.dump();
  }

  static inline const json* doc_ = nullptr;
};

TEST_F(CliServerTest, WhoAmI) {
  CliRun r = Cli({"whoami"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("role:   cluster-admin"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tenant: default"), std::string::npos) << r.out;
  r = Cli({"whoami", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.Json()["role"], "cluster-admin");
  ExpectDocumented(r.Json(), "GET", "/v1/whoami");
}

TEST_F(CliServerTest, UsageOfTheCallersTenant) {
  // What the scheduler leader accounts (usage_accounting.h), written to the store directly.
  {
    auto unit = Store().Begin();
    ASSERT_TRUE(unit.ok()) << unit.status().ToString();
    ASSERT_TRUE((*unit)->fair_share().AddDailyUsage({{1, 0, "2026-11-20", "cpu", 7200}}).ok());
    ASSERT_TRUE((*unit)->Commit().ok());
  }
  CliRun r = Cli({"usage", "--from", "2026-11-01", "--to", "2026-11-30"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("total: 2.00 cpu slot-hours"), std::string::npos) << r.out;
  r = Cli({"usage", "1", "--from", "2026-11-01", "--to", "2026-11-30", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  ExpectDocumented(r.Json(), "GET", "/v1/tenants/{id}/usage");
  EXPECT_EQ(Cli({"usage", "--from", "November"}).code, cli::kExitRefused);
}

TEST_F(CliServerTest, TenantsCreateListShowAndSetWithVersions) {
  CliRun r = Cli({"tenants", "create", "robotics", "--weight", "2", "--quota-slots", "8",
                  "--quota-pending-jobs", "100", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json created = r.Json();
  ExpectDocumented(created, "POST", "/v1/tenants", 201);
  EXPECT_EQ(created["name"], "robotics");
  EXPECT_EQ(created["weight"], 2.0);
  EXPECT_EQ(created["quota"]["slots"], 8);
  EXPECT_TRUE(created["quota"]["running_jobs"].is_null());
  const std::string id = created["id"].dump();

  r = Cli({"tenants"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("robotics"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0/8"), std::string::npos) << r.out;
  r = Cli({"tenants", "-o", "json"});
  ASSERT_EQ(r.code, 0);
  ExpectDocumented(r.Json(), "GET", "/v1/tenants");

  r = Cli({"tenants", "show", id, "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  ExpectDocumented(r.Json(), "GET", "/v1/tenants/{id}");
  const int64_t version = r.Json()["version"].get<int64_t>();

  // Without --if-version: the version a fresh GET reads.
  r = Cli({"tenants", "set", id, "--quota-slots", "16", "--quota-pending-jobs", "none"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("slots:         0/16"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("pending jobs:  0/-"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("version:       " + std::to_string(version + 1)), std::string::npos);

  // A change made since the caller read the tenant is reported, and nothing is written.
  r = Cli({"tenants", "set", id, "--weight", "5", "--if-version", std::to_string(version)});
  EXPECT_EQ(r.code, cli::kExitRefused);
  EXPECT_NE(r.err.find("embody: If-Match: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("read it again"), std::string::npos) << r.err;
  r = Cli({"tenants", "show", id, "-o", "json"});
  EXPECT_EQ(r.Json()["weight"], 2.0);
  r = Cli({"tenants", "set", id, "--weight", "5", "--if-version", std::to_string(version + 1), "-o",
           "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  ExpectDocumented(r.Json(), "PATCH", "/v1/tenants/{id}");
  EXPECT_EQ(r.Json()["weight"], 5.0);

  // The storage quota in GiB, sent in bytes and shown against what the tenant holds.
  r = Cli({"tenants", "set", id, "--quota-storage-gib", "2"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("storage:       0.00/2.00 GiB in use/quota"), std::string::npos) << r.out;
  r = Cli({"tenants", "show", id, "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  ExpectDocumented(r.Json(), "GET", "/v1/tenants/{id}");
  EXPECT_EQ(r.Json()["quota"]["storage_bytes"], int64_t{2} << 30);
  EXPECT_EQ(r.Json()["usage"]["storage_bytes"], 0);
  r = Cli({"tenants", "set", id, "--quota-storage-gib", "none", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(r.Json()["quota"]["storage_bytes"].is_null());

  // The server's message and field, exit 1; a usage error never reaches it, exit 2.
  r = Cli({"tenants", "create", "Bad Name"});
  EXPECT_EQ(r.code, cli::kExitRefused);
  EXPECT_NE(r.err.find("embody: name: "), std::string::npos) << r.err;
  r = Cli({"tenants", "set", id});
  EXPECT_EQ(r.code, cli::kExitUsage);
  r = Cli({"tenants", "show", "999999"});
  EXPECT_EQ(r.code, cli::kExitRefused);
  EXPECT_NE(r.err.find("tenant 999999 not found"), std::string::npos) << r.err;
}

TEST_F(CliServerTest, TokensCreateListRevoke) {
  CliRun r = Cli({"tenants", "create", "vision", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string tenant = r.Json()["id"].dump();

  r = Cli(
      {"tokens", "create", "--role", "tenant-admin", "--name", "vision admin", "--tenant", tenant});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("only time the token's secret is shown"), std::string::npos) << r.err;
  const size_t at = r.out.find("token:   ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string admin = r.out.substr(at + 9, 64);

  r = Cli({"whoami", "-o", "json"}, admin);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.Json()["role"], "tenant-admin");
  EXPECT_EQ(r.Json()["tenant"], "vision");

  // The tenant-admin makes a member token; -o json carries the secret once.
  r = Cli({"tokens", "create", "--role", "member", "--name", "ci", "--expires",
           "2099-01-01T00:00:00Z", "-o", "json"},
          admin);
  ASSERT_EQ(r.code, 0) << r.err;
  ExpectDocumented(r.Json(), "POST", "/v1/tokens", 201);
  const std::string member = r.Json()["token"];
  const std::string member_id = r.Json()["id"].dump();

  r = Cli({"tokens", "ls", "-o", "json"}, admin);
  ASSERT_EQ(r.code, 0) << r.err;
  ExpectDocumented(r.Json(), "GET", "/v1/tokens");
  ASSERT_EQ(r.Json()["tokens"].size(), 2u) << r.out;
  for (const json& t : r.Json()["tokens"]) {
    EXPECT_FALSE(t.contains("token")) << "a secret listed: " << t.dump();
    EXPECT_EQ(t["tenant"], "vision");
  }
  r = Cli({"tokens", "ls"}, admin);
  EXPECT_NE(r.out.find("ci"), std::string::npos);
  EXPECT_NE(r.out.find("2099-01-01T00:00:00.000Z  active"), std::string::npos) << r.out;

  // A member may not make tokens, nor create tenants: the server's refusal, exit 1.
  r = Cli({"tokens", "create", "--role", "viewer", "--name", "x"}, member);
  EXPECT_EQ(r.code, cli::kExitRefused);
  EXPECT_NE(r.err.find("creating tokens needs role tenant-admin"), std::string::npos) << r.err;
  r = Cli({"tenants", "create", "mine"}, member);
  EXPECT_EQ(r.code, cli::kExitRefused);
  EXPECT_NE(r.err.find("needs role cluster-admin"), std::string::npos) << r.err;
  // Nor grant a role above its own.
  r = Cli({"tokens", "create", "--role", "cluster-admin", "--name", "up"}, admin);
  EXPECT_EQ(r.code, cli::kExitRefused);

  r = Cli({"tokens", "revoke", member_id, "-o", "json"}, admin);
  ASSERT_EQ(r.code, 0) << r.err;
  ExpectDocumented(r.Json(), "DELETE", "/v1/tokens/{id}");
  EXPECT_TRUE(r.Json()["revoked_at"].is_string());
  r = Cli({"whoami"}, member);
  EXPECT_EQ(r.code, cli::kExitRefused);
  EXPECT_NE(r.err.find("token revoked"), std::string::npos) << r.err;
  r = Cli({"tokens", "ls"}, admin);
  EXPECT_NE(r.out.find("revoked"), std::string::npos) << r.out;
}

TEST_F(CliServerTest, AuditFollowsPages) {
  // More refusals than one page holds (500): each is an audit row.
  httplib::Client http("127.0.0.1", server_->port());
  for (int i = 0; i < 510; ++i) {
    auto res = http.Post("/v1/tenants", {{"Authorization", "Bearer not-a-token"}}, "{}",
                         "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 401);
  }
  CliRun r = Cli({"audit", "--limit", "3", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  ExpectDocumented(r.Json(), "GET", "/v1/audit");
  ASSERT_EQ(r.Json()["entries"].size(), 3u);
  EXPECT_EQ(r.Json()["entries"][0]["outcome"], "unauthenticated");
  EXPECT_EQ(r.Json()["entries"][0]["actor"], "anonymous");
  EXPECT_TRUE(r.Json()["next_cursor"].is_string());

  r = Cli({"audit", "--all", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json all = r.Json();
  EXPECT_TRUE(all["next_cursor"].is_null());
  ASSERT_GT(all["entries"].size(), 510u);
  int64_t last = INT64_MAX;
  for (const json& e : all["entries"]) {  // newest first, each once, across pages
    EXPECT_LT(e["id"].get<int64_t>(), last);
    last = e["id"].get<int64_t>();
  }

  r = Cli({"audit", "--limit", "2"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("TIME"), std::string::npos);
  EXPECT_NE(r.out.find("unauthenticated"), std::string::npos) << r.out;

  // A member reads no audit log.
  r = Cli({"tokens", "create", "--role", "member", "--name", "m", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  r = Cli({"audit"}, r.Json()["token"]);
  EXPECT_EQ(r.code, cli::kExitRefused);
  EXPECT_NE(r.err.find("audit log"), std::string::npos) << r.err;
}

TEST_F(CliServerTest, NodesDrainAndUndrain) {
  CliRun r = Cli({"nodes", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  ExpectDocumented(r.Json(), "GET", "/v1/nodes");
  ASSERT_FALSE(r.Json()["nodes"].empty());
  const json parked = r.Json()["nodes"][0];
  ASSERT_EQ(parked["name"], "parked");
  ASSERT_EQ(parked["draining"], true);
  const std::string id = parked["id"].dump();

  r = Cli({"nodes", "undrain", id, "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  ExpectDocumented(r.Json(), "POST", "/v1/nodes/{id}/undrain");
  EXPECT_EQ(r.Json()["draining"], false);
  r = Cli({"nodes", "drain", id});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "node " + id + " (parked) draining: no new jobs are placed on it\n");
  r = Cli({"nodes"});
  EXPECT_NE(r.out.find("parked"), std::string::npos);
  EXPECT_NE(r.out.find("yes"), std::string::npos) << r.out;
  r = Cli({"nodes", "drain", "999999"});
  EXPECT_EQ(r.code, cli::kExitRefused);
}

TEST_F(CliServerTest, JobsListAndShowAsJson) {
  Reply sub = Call("POST", "/v1/jobs", Admin(), PendingSpec("cli-json").dump());
  ASSERT_EQ(sub.status, 201) << sub.text;
  const std::string id = sub.body["id"].dump();
  CliRun r = Cli({"ls", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  ExpectDocumented(r.Json(), "GET", "/v1/jobs");
  EXPECT_EQ(r.Json()["jobs"][0]["name"], "cli-json");
  r = Cli({"show", id, "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  ExpectDocumented(r.Json(), "GET", "/v1/jobs/{id}");
  r = Cli({"events", id, "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  ExpectDocumented(r.Json(), "GET", "/v1/jobs/{id}/events");
  r = Cli({"metrics", id, "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  ExpectDocumented(r.Json(), "GET", "/v1/jobs/{id}/metrics");
  r = Cli({"cancel", id, "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  ExpectDocumented(r.Json(), "POST", "/v1/jobs/{id}/cancel");
  EXPECT_EQ(r.Json()["state"], "CANCELLED");
}

// `embody show` prints the job the server sends, read through its view, and says whether it
// has started; `embody ls` lists it.
TEST_F(CliServerTest, ShowAndLsPrintAPendingJob) {
  Reply sub = Call("POST", "/v1/jobs", Admin(), PendingSpec("cli-pending").dump());
  ASSERT_EQ(sub.status, 201) << sub.text;
  EXPECT_TRUE(sub.body["wait_seconds"].is_null()) << sub.text;
  const std::string id = sub.body["id"].dump();
  CliRun r = Cli({"show", id});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"name\": \"cli-pending\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"wait_seconds\": null"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nnot started yet\n"), std::string::npos) << r.out;
  r = Cli({"ls"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(id + "  "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cli-pending"), std::string::npos) << r.out;
  r = Cli({"events", id});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("  state  {"), std::string::npos) << r.out;
}

// The paper's table (docs/planner.md) through the CLI and the server: a plan request file
// with the cluster given by flag, as a table and as documented JSON; a bad field is refused.
TEST_F(CliServerTest, PlanThePapersTable) {
  const std::string dir = std::string(EMBODY_SOURCE_DIR) + "/docs/plan/";
  CliRun r = Cli({"plan", dir + "groot-n15-request.json", "--cluster", dir + "paper-cluster.json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("GPUS  NODES  STEP"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("256   32"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2.55 h"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1024  128"), std::string::npos) << r.out;
  r = Cli({"plan", dir + "groot-n15-request.json", "--cluster", dir + "paper-cluster.json",
           "--gpus", "8,16", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  ExpectDocumented(r.Json(), "POST", "/v1/plan");
  EXPECT_EQ(r.Json()["sizes"].size(), 2u);
  r = Cli({"plan", dir + "paper-cluster.json", "--gpus", "8", "--cluster",
           dir + "paper-cluster.json"});
  EXPECT_EQ(r.code, cli::kExitRefused);
  EXPECT_NE(r.err.find("embody: job."), std::string::npos) << r.err;
  r = Cli({"plan", dir + "groot-n15-request.json", "--gpus", "8,x"});
  EXPECT_EQ(r.code, cli::kExitRefused);
  EXPECT_NE(r.err.find("--gpus"), std::string::npos) << r.err;
}

TEST_F(CliServerTest, UsageErrorsSendNothing) {
  std::ostringstream out, err;
  std::istringstream in;
  cli::Io io{out, err, in};
  bool asked = false;
  io.config = [&asked]() -> common::Result<cli::Config> {
    asked = true;
    return common::Unavailable("not to be called");
  };
  EXPECT_EQ(cli::RunCli({"tokens", "revoke", "x"}, io), cli::kExitUsage);
  EXPECT_FALSE(asked);
  EXPECT_EQ(cli::RunCli({"whoami"}, io), cli::kExitUsage);  // no server configured
  EXPECT_TRUE(asked);
}

// `datasets upload`: a file sent in several chunks and committed; an interrupted upload
// continued with --resume from the bytes the server holds; --resume of another file refused.
TEST_F(CliServerTest, DatasetsUploadInChunksAndResume) {
  std::string content;
  for (int i = 0; i < (5 << 19); ++i) content.push_back(static_cast<char>(i * 31 % 251));
  const std::string file = *dir_ + "/upload.hdf5";
  ASSERT_TRUE(common::WriteFileAtomic(file, content).ok());

  CliRun r = Cli({"datasets", "upload", "uploaded", file, "--chunk-mib", "1", "--filter", "train",
                  "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  ExpectDocumented(r.Json(), "POST", "/v1/datasets/{id}/upload/commit");
  EXPECT_EQ(r.Json()["state"], "importing");
  EXPECT_EQ(r.Json()["received_bytes"], content.size());
  EXPECT_EQ(r.Json()["source"]["upload"]["sha256"], common::Sha256Hex(content));
  EXPECT_EQ(r.Json()["source"]["filter"], "train");
  EXPECT_NE(r.err.find("(100%)"), std::string::npos) << r.err;

  // An upload stopped after its first chunk (as if the client had died) ...
  Reply start = Call("POST", "/v1/datasets", Admin(),
                     json{{"name", "resumed"},
                          {"source", {{"upload", {{"bytes", content.size()},
                                                  {"sha256", common::Sha256Hex(content)}}}}}}
                         .dump());
  ASSERT_EQ(start.status, 201) << start.text;
  const std::string id = start.body["id"].dump();
  ASSERT_EQ(Call("PUT", "/v1/datasets/" + id + "/upload?offset=0", Admin(), content.substr(0, 1 << 20))
                .status,
            200);
  // ... is not continued with another file ...
  const std::string other = *dir_ + "/other.hdf5";
  ASSERT_TRUE(common::WriteFileAtomic(other, "not the same file").ok());
  r = Cli({"datasets", "upload", "resumed", other, "--resume", id});
  EXPECT_EQ(r.code, cli::kExitRefused);
  EXPECT_NE(r.err.find("another file"), std::string::npos) << r.err;
  // ... but with its own, from the bytes held.
  r = Cli({"datasets", "upload", "resumed", file, "--resume", id, "--chunk-mib", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("resuming dataset " + id + " at 1.0 MiB"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("uploaded, importing as job"), std::string::npos) << r.out;
  Reply d = Call("GET", "/v1/datasets/" + id, Admin());
  EXPECT_EQ(d.body["state"], "importing");
  EXPECT_EQ(d.body["received_bytes"], content.size());
  EXPECT_EQ(Cli({"datasets", "upload", "x", *dir_ + "/missing.hdf5"}).code, cli::kExitRefused);
  EXPECT_EQ(Cli({"datasets", "upload", "x", file, "--chunk-mib", "9"}).code, cli::kExitUsage);
}

}  // namespace
}  // namespace controlplane
