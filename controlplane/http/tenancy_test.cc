// Multi-tenancy against a real server, on both stores (server_test_fixture.h): the isolation
// matrix (every route x every kind of caller x own or other tenant -> the expected status, from
// one table) and the attacks an operator must be safe from: a node credential acting as another
// node, events and logs for jobs not on the reporting node, token grants above one's own role,
// leaks of tenant names through /v1/nodes and /metrics. Two cases run on PostgreSQL only, as they
// reach past the API into it: a tenant deleted by hand and the cache told by its notification,
// and the audit row written by the transaction of the change it records.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "common/crypto.h"
#include "common/time_util.h"
#include "controlplane/service/fair_share_store.h"
#include "controlplane/testing/server_test_fixture.h"

namespace controlplane {
namespace {

using nlohmann::json;

// The callers of the matrix.
enum Caller {
  kClusterAdmin,
  kTenantAdmin,
  kMember,
  kViewer,
  kNodeAllocated,  // credential of the node the own-tenant job runs on
  kNodeOther,      // credential of another node
  kJobToken,       // a job's token is for its agent's local API, never the server
  kNoToken,
  kExpired,
  kRevoked,
  kCallers
};
const char* const kCallerNames[] = {"cluster-admin", "tenant-admin", "member",  "viewer",
                                    "node(alloc)",   "node(other)",  "job",     "none",
                                    "expired",       "revoked"};

class TenancyTest : public ServerTest {
 protected:
  static void SetUpTestSuite() {
    // Nodes here heartbeat only when a test says so: they must not go DOWN meanwhile.
    // Every anonymous refusal of these tests is audited (the budget per address is
    // audit_budget_test.cc's).
    StartServer("tenancy", /*heartbeat_interval_ms=*/60'000, "",
                [](ServerOptions& o) { o.audit_anonymous_burst = 100'000; });
    ids_ = new std::map<std::string, int64_t>;
    tokens_ = new std::map<Caller, std::string>;
    Ids()["acme"] = CreateTenant("acme");
    Ids()["globex"] = CreateTenant("globex");
    (*tokens_)[kClusterAdmin] = Admin();
    (*tokens_)[kTenantAdmin] = CreateToken(Ids()["acme"], "tenant-admin", "acme-admin");
    (*tokens_)[kMember] = CreateToken(Ids()["acme"], "member", "acme-member");
    (*tokens_)[kViewer] = CreateToken(Ids()["acme"], "viewer", "acme-viewer");
    (*tokens_)[kJobToken] = "4f1c0ffee0ddba11deadbeef4f1c0ffee0ddba11deadbeef4f1c0ffee0ddba11";
    (*tokens_)[kNoToken] = "";
    globex_member_ = new std::string(CreateToken(Ids()["globex"], "member", "globex-member"));
    // Expires shortly; the matrix runs after it has. The server refuses an expiry that is past
    // when the request arrives (400): a slow answer is retried with a later one.
    int64_t expires_ms = 0;
    for (int64_t ahead = 100; ahead <= 6400 && Token(kExpired).empty(); ahead *= 2) {
      expires_ms = common::NowMillis() + ahead;
      json exp = {{"tenant_id", Ids()["acme"]},
                  {"role", "member"},
                  {"name", "short-lived"},
                  {"expires_at", common::FormatTimeMillis(expires_ms)}};
      Reply e = Call("POST", "/v1/tokens", Admin(), exp.dump());
      if (e.status == 201) {
        (*tokens_)[kExpired] = e.body["token"];
      } else {
        ASSERT_EQ(e.status, 400) << e.text;
      }
    }
    ASSERT_FALSE(Token(kExpired).empty());
    Reply r = Call("POST", "/v1/tokens", Admin(),
                   json{{"tenant_id", Ids()["acme"]}, {"role", "member"}, {"name", "revoked"}}.dump());
    ASSERT_EQ(r.status, 201);
    (*tokens_)[kRevoked] = r.body["token"];
    ASSERT_EQ(Call("DELETE", "/v1/tokens/" + r.body["id"].dump(), Admin()).status, 200);

    // The acme job runs on node-alloc, the only node with a free slot when it is submitted.
    Ids()["node_alloc"] = RegisterNode("node-alloc", 1);
    Reply j = Call("POST", "/v1/jobs", Token(kMember), Spec("acme-job").dump());
    ASSERT_EQ(j.status, 201) << j.text;
    Ids()["acme_job"] = j.body["id"];
    WaitForState(Ids()["acme_job"], "SCHEDULED");
    Ids()["node_other"] = RegisterNode("node-other", 1);
    ASSERT_EQ(Call("POST", "/v1/nodes/" + std::to_string(Ids()["node_other"]) + "/drain", Admin())
                  .status, 200);
    Ids()["spare"] = RegisterNode("spare", 0);
    (*tokens_)[kNodeAllocated] = NodeToken(Ids()["node_alloc"]);
    (*tokens_)[kNodeOther] = NodeToken(Ids()["node_other"]);
    Reply g = Call("POST", "/v1/jobs", *globex_member_, PendingSpec("globex-job").dump());
    ASSERT_EQ(g.status, 201) << g.text;
    Ids()["globex_job"] = g.body["id"];
    Ids()["acme_dataset"] = ImportDataset(Token(kMember));
    Ids()["globex_dataset"] = ImportDataset(*globex_member_);
    while (common::NowMillis() <= expires_ms) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  static void TearDownTestSuite() {
    delete ids_;
    delete tokens_;
    delete globex_member_;
    ServerTest::TearDownTestSuite();
  }

  static std::map<std::string, int64_t>& Ids() { return *ids_; }
  static std::string Token(Caller c) { return (*tokens_)[c]; }

  static json Spec(const std::string& name) {
    return {{"name", name}, {"kind", "command"}, {"command", {"true"}},
            {"resources", {{"nodes", 1}}}};
  }
  static int64_t CreateTenant(const std::string& name) {
    Reply r = Call("POST", "/v1/tenants", Admin(), json{{"name", name}}.dump());
    EXPECT_EQ(r.status, 201) << r.text;
    return r.body.value("id", int64_t{0});
  }
  static std::string CreateToken(int64_t tenant, const std::string& role, const std::string& name) {
    Reply r = Call("POST", "/v1/tokens", Admin(),
                   json{{"tenant_id", tenant}, {"role", role}, {"name", name}}.dump());
    EXPECT_EQ(r.status, 201) << r.text;
    return r.body.value("token", "");
  }
  // A dataset import (it stays importing: its job waits for a free slot); returns the dataset id.
  static int64_t ImportDataset(const std::string& token) {
    Reply r = Call("POST", "/v1/datasets", token,
                   json{{"name", "matrix"}, {"source", {{"path", "/nonexistent/m.hdf5"}}}}.dump());
    EXPECT_EQ(r.status, 201) << r.text;
    return r.body.value("id", int64_t{0});
  }
  // A dataset upload of 4 bytes ("abcd"), still uploading; returns the dataset id.
  static int64_t StartUpload(const std::string& token) {
    Reply r = Call("POST", "/v1/datasets", token,
                   json{{"name", "upload"},
                        {"source", {{"upload", {{"bytes", 4}, {"sha256", common::Sha256Hex("abcd")}}}}}}
                       .dump());
    EXPECT_EQ(r.status, 201) << r.text;
    return r.body.value("id", int64_t{0});
  }
  // /metrics as `token` gets it, once it holds `needle` (5 s at most): the per-tenant series are
  // counted once a second, so a scrape right after the start may not have them yet.
  static std::string MetricsHolding(const std::string& token, const std::string& needle) {
    std::string text;
    for (int i = 0; i < 50; ++i) {
      text = Call("GET", "/metrics", token).text;
      if (text.find(needle) != std::string::npos) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return text;
  }
  static void WaitForState(int64_t job, const std::string& state) {
    for (int i = 0; i < 100; ++i) {
      if (Call("GET", "/v1/jobs/" + std::to_string(job), Admin()).body["state"] == state) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "job " << job << " never " << state;
  }

  static inline std::map<std::string, int64_t>* ids_ = nullptr;
  static inline std::map<Caller, std::string>* tokens_ = nullptr;
  static inline std::string* globex_member_ = nullptr;
};

// One row of the matrix: a call made against the own tenant (acme) or the other (globex), and
// the status each caller must get for each.
struct Row {
  std::string name;
  // Makes the call for `caller` against tenant `own` ? acme : globex; returns the status.
  std::function<int(Caller caller, bool own)> call;
  std::vector<int> own;    // by Caller
  std::vector<int> other;  // by Caller
};

TEST_F(TenancyTest, IsolationMatrix) {
  auto tenant = [](bool own) { return Ids()[own ? "acme" : "globex"]; };
  auto job = [](bool own) { return std::to_string(Ids()[own ? "acme_job" : "globex_job"]); };
  auto dataset = [](bool own) {
    return std::to_string(Ids()[own ? "acme_dataset" : "globex_dataset"]);
  };
  // A job made for one cell of a mutating row, so cells do not change each other's state.
  auto fresh_job = [](bool own) {
    Reply r = Call("POST", "/v1/jobs", own ? Token(kMember) : *globex_member_,
                   PendingSpec("cell").dump());
    EXPECT_EQ(r.status, 201) << r.text;
    return r.body["id"].dump();
  };
  auto fresh_token = [&](bool own) {
    Reply r = Call("POST", "/v1/tokens", Admin(),
                   json{{"tenant_id", tenant(own)}, {"role", "viewer"}, {"name", "cell"}}.dump());
    EXPECT_EQ(r.status, 201) << r.text;
    return r.body["id"].dump();
  };
  auto get = [](const std::string& path) {
    return [path](Caller c, bool) { return Call("GET", path, Token(c)).status; };
  };
  const int N = 401, F = 403, X = 404;
  // Callers:          admin tadmin member viewer nodeA nodeB  job none exp  rev
  const std::vector<int> read_job_own{200, 200, 200, 200, F, F, N, N, N, N};
  const std::vector<int> read_job_other{200, X, X, X, F, F, N, N, N, N};
  const std::vector<int> people_read{200, 200, 200, 200, F, F, N, N, N, N};
  const std::vector<int> admins_only{200, F, F, F, F, F, N, N, N, N};
  const std::vector<int> tenant_admins{200, 200, F, F, F, F, N, N, N, N};

  std::vector<Row> rows = {
      {"GET /v1/jobs/{id}",
       [&](Caller c, bool own) { return Call("GET", "/v1/jobs/" + job(own), Token(c)).status; },
       read_job_own, read_job_other},
      {"GET /v1/jobs/{id}/events",
       [&](Caller c, bool own) {
         return Call("GET", "/v1/jobs/" + job(own) + "/events", Token(c)).status;
       },
       read_job_own, read_job_other},
      {"GET /v1/jobs/{id}/logs",
       [&](Caller c, bool own) {
         return Call("GET", "/v1/jobs/" + job(own) + "/logs", Token(c)).status;
       },
       read_job_own, read_job_other},
      {"GET /v1/jobs/{id}/metrics",
       [&](Caller c, bool own) {
         return Call("GET", "/v1/jobs/" + job(own) + "/metrics", Token(c)).status;
       },
       read_job_own, read_job_other},
      {"POST /v1/jobs/{id}/cancel",
       [&](Caller c, bool own) {
         return Call("POST", "/v1/jobs/" + fresh_job(own) + "/cancel", Token(c)).status;
       },
       {200, 200, 200, F, F, F, N, N, N, N}, {200, X, X, F, F, F, N, N, N, N}},
      {"POST /v1/jobs",
       [&](Caller c, bool) {
         return Call("POST", "/v1/jobs", Token(c), PendingSpec("matrix").dump()).status;
       },
       {201, 201, 201, F, F, F, N, N, N, N}, {201, 201, 201, F, F, F, N, N, N, N}},
      {"GET /v1/jobs", get("/v1/jobs"), people_read, people_read},
      {"POST /v1/datasets",
       [&](Caller c, bool) {
         return Call("POST", "/v1/datasets", Token(c),
                     json{{"name", "m"}, {"source", {{"path", "/nonexistent/m.hdf5"}}}}.dump())
             .status;
       },
       {201, 201, 201, F, F, F, N, N, N, N}, {201, 201, 201, F, F, F, N, N, N, N}},
      {"GET /v1/datasets", get("/v1/datasets"), people_read, people_read},
      {"GET /v1/datasets/{id}",
       [&](Caller c, bool own) {
         return Call("GET", "/v1/datasets/" + dataset(own), Token(c)).status;
       },
       read_job_own, read_job_other},
      // A fresh import per cell, still importing: who passes the checks gets 409 (cancel its job
      // first), everyone else their 403/404.
      {"DELETE /v1/datasets/{id}",
       [&](Caller c, bool own) {
         const int64_t fresh = ImportDataset(own ? Token(kMember) : *globex_member_);
         return Call("DELETE", "/v1/datasets/" + std::to_string(fresh), Token(c)).status;
       },
       {409, 409, 409, F, F, F, N, N, N, N}, {409, X, X, F, F, F, N, N, N, N}},
      // Uploads: a fresh one per cell, removed after it so the per-tenant cap never bites.
      {"PUT /v1/datasets/{id}/upload",
       [&](Caller c, bool own) {
         const int64_t fresh = StartUpload(own ? Token(kMember) : *globex_member_);
         const int status = Call("PUT", "/v1/datasets/" + std::to_string(fresh) + "/upload?offset=0",
                                 Token(c), "ab")
                                .status;
         Call("DELETE", "/v1/datasets/" + std::to_string(fresh), Admin());
         return status;
       },
       {200, 200, 200, F, F, F, N, N, N, N}, {200, X, X, X, F, F, N, N, N, N}},
      {"POST /v1/datasets/{id}/upload/commit",
       [&](Caller c, bool own) {
         const std::string owner = own ? Token(kMember) : *globex_member_;
         const int64_t fresh = StartUpload(owner);
         EXPECT_EQ(Call("PUT", "/v1/datasets/" + std::to_string(fresh) + "/upload?offset=0", owner,
                        "abcd")
                       .status,
                   200);
         const int status =
             Call("POST", "/v1/datasets/" + std::to_string(fresh) + "/upload/commit", Token(c))
                 .status;
         Call("DELETE", "/v1/datasets/" + std::to_string(fresh), Admin());
         return status;
       },
       {200, 200, 200, F, F, F, N, N, N, N}, {200, X, X, X, F, F, N, N, N, N}},
      // Only the agent of the node an import runs on reads an upload's bytes: people are refused,
      // and neither node runs this one.
      {"GET /v1/datasets/{id}/upload",
       [&](Caller c, bool own) {
         const int64_t fresh = StartUpload(own ? Token(kMember) : *globex_member_);
         const int status =
             Call("GET", "/v1/datasets/" + std::to_string(fresh) + "/upload", Token(c)).status;
         Call("DELETE", "/v1/datasets/" + std::to_string(fresh), Admin());
         return status;
       },
       {F, F, F, F, X, X, N, N, N, N}, {F, F, F, F, X, X, N, N, N, N}},
      {"GET /v1/tenants/{id}",
       [&](Caller c, bool own) {
         return Call("GET", "/v1/tenants/" + std::to_string(tenant(own)), Token(c)).status;
       },
       {200, 200, 200, 200, F, F, N, N, N, N}, {200, X, X, X, F, F, N, N, N, N}},
      {"GET /v1/tenants/{id}/usage",
       [&](Caller c, bool own) {
         return Call("GET", "/v1/tenants/" + std::to_string(tenant(own)) + "/usage", Token(c))
             .status;
       },
       {200, 200, 200, 200, F, F, N, N, N, N}, {200, X, X, X, F, F, N, N, N, N}},
      {"PATCH /v1/tenants/{id}",
       [&](Caller c, bool own) {
         return Call("PATCH", "/v1/tenants/" + std::to_string(tenant(own)), Token(c),
                     json{{"weight", 1}}.dump())
             .status;
       },
       {200, F, F, F, F, F, N, N, N, N}, {200, X, X, X, F, F, N, N, N, N}},
      {"POST /v1/tenants",
       [&](Caller c, bool own) {
         static int n = 0;
         return Call("POST", "/v1/tenants", Token(c),
                     json{{"name", "t" + std::to_string(++n) + (own ? "a" : "b")}}.dump())
             .status;
       },
       {201, F, F, F, F, F, N, N, N, N}, {201, F, F, F, F, F, N, N, N, N}},
      {"GET /v1/tenants", get("/v1/tenants"), people_read, people_read},
      {"POST /v1/tokens (viewer)",
       [&](Caller c, bool own) {
         return Call("POST", "/v1/tokens", Token(c),
                     json{{"tenant_id", tenant(own)}, {"role", "viewer"}, {"name", "m"}}.dump())
             .status;
       },
       {201, 201, F, F, F, F, N, N, N, N}, {201, X, F, F, F, F, N, N, N, N}},
      {"POST /v1/tokens (cluster-admin)",
       [&](Caller c, bool own) {
         return Call("POST", "/v1/tokens", Token(c),
                     json{{"tenant_id", tenant(own)}, {"role", "cluster-admin"}, {"name", "m"}}.dump())
             .status;
       },
       {201, F, F, F, F, F, N, N, N, N}, {201, X, F, F, F, F, N, N, N, N}},
      {"GET /v1/tokens", get("/v1/tokens"), tenant_admins, tenant_admins},
      {"DELETE /v1/tokens/{id}",
       [&](Caller c, bool own) {
         return Call("DELETE", "/v1/tokens/" + fresh_token(own), Token(c)).status;
       },
       {200, 200, F, F, F, F, N, N, N, N}, {200, X, X, X, F, F, N, N, N, N}},
      {"GET /v1/audit", get("/v1/audit"), tenant_admins, tenant_admins},
      {"GET /v1/whoami", get("/v1/whoami"),
       {200, 200, 200, 200, 200, 200, N, N, N, N}, {200, 200, 200, 200, 200, 200, N, N, N, N}},
      {"GET /v1/nodes", get("/v1/nodes"), people_read, people_read},
      {"POST /v1/nodes/{id}/drain",
       [&](Caller c, bool) {
         return Call("POST", "/v1/nodes/" + std::to_string(Ids()["spare"]) + "/drain", Token(c))
             .status;
       },
       admins_only, admins_only},
      {"GET /v1/prometheus/targets", get("/v1/prometheus/targets"), admins_only, admins_only},
      {"POST /v1/agents/{id}/heartbeat (the allocated node)",
       [&](Caller c, bool) {
         return Call("POST", "/v1/agents/" + std::to_string(Ids()["node_alloc"]) + "/heartbeat",
                     Token(c), "{}")
             .status;
       },
       {F, F, F, F, 200, F, N, N, N, N}, {F, F, F, F, 200, F, N, N, N, N}},
      {"POST /v1/agents/register (the allocated node's name)",
       [&](Caller c, bool) {
         json req = {{"name", "node-alloc"}, {"address", "127.0.0.1"}, {"cpu_slots", 1}};
         return Call("POST", "/v1/agents/register", Token(c), req.dump()).status;
       },
       {F, F, F, F, 200, F, N, N, N, N}, {F, F, F, F, 200, F, N, N, N, N}},
  };

  int cells = 0, wrong = 0;
  std::string report;
  for (const Row& row : rows) {
    for (bool own : {true, false}) {
      const std::vector<int>& want = own ? row.own : row.other;
      ASSERT_EQ(want.size(), static_cast<size_t>(kCallers)) << row.name;
      for (int c = 0; c < kCallers; ++c) {
        const int got = row.call(static_cast<Caller>(c), own);
        ++cells;
        if (got != want[c]) {
          ++wrong;
          report += row.name + (own ? " [own] " : " [other] ") + kCallerNames[c] + ": got " +
                    std::to_string(got) + ", want " + std::to_string(want[c]) + "\n";
        }
      }
    }
  }
  EXPECT_EQ(wrong, 0) << wrong << " of " << cells << " cells differ:\n" << report;
  EXPECT_GE(cells, 400);
}

TEST_F(TenancyTest, ListsShowOnlyTheCallersTenant) {
  for (Caller c : {kTenantAdmin, kMember, kViewer}) {
    json jobs = Call("GET", "/v1/jobs?limit=500", Token(c)).body["jobs"];
    ASSERT_FALSE(jobs.empty());
    for (const auto& j : jobs) EXPECT_EQ(j["tenant"], "acme") << j.dump();
    json tenants = Call("GET", "/v1/tenants", Token(c)).body["tenants"];
    ASSERT_EQ(tenants.size(), 1u);
    EXPECT_EQ(tenants[0]["name"], "acme");
  }
  // A cluster-admin narrows to one tenant with tenant_id; anyone else asking for another gets none.
  json globex = Call("GET", "/v1/jobs?tenant_id=" + std::to_string(Ids()["globex"]), Admin()).body;
  ASSERT_FALSE(globex["jobs"].empty());
  for (const auto& j : globex["jobs"]) EXPECT_EQ(j["tenant"], "globex");
  EXPECT_TRUE(Call("GET", "/v1/jobs?tenant_id=" + std::to_string(Ids()["globex"]), Token(kMember))
                  .body["jobs"]
                  .empty());
  // A tenant-admin sees its tenant's people tokens, never the operator's or a node's.
  for (const auto& t : Call("GET", "/v1/tokens", Token(kTenantAdmin)).body["tokens"]) {
    EXPECT_EQ(t["tenant"], "acme");
    EXPECT_NE(t["role"], "cluster-admin");
    EXPECT_NE(t["role"], "node");
  }
  // The audit log of a tenant-admin holds its tenant's calls only.
  json audit = Call("GET", "/v1/audit?limit=500", Token(kTenantAdmin)).body;
  ASSERT_FALSE(audit["entries"].empty());
  for (const auto& a : audit["entries"]) {
    EXPECT_TRUE(a["tenant"] == "acme" || a["tenant"] == "default") << a.dump();
    // globex's job appears only in acme's own refused tries (downloads of its logs are audited).
    if (a["path"].get<std::string>().find("/jobs/" + std::to_string(Ids()["globex_job"]) + "/") !=
        std::string::npos) {
      EXPECT_EQ(a["tenant"], "acme") << a.dump();
      EXPECT_EQ(a["status"], 404) << a.dump();
    }
  }
}

TEST_F(TenancyTest, NodeCredentialActsForItsNodeOnly) {
  const std::string alloc = std::to_string(Ids()["node_alloc"]);
  const int64_t acme_job = Ids()["acme_job"], globex_job = Ids()["globex_job"];
  // Another node's credential heartbeating as node-alloc: 403, and no launch handed out.
  Reply hijack = Call("POST", "/v1/agents/" + alloc + "/heartbeat", Token(kNodeOther),
                      json{{"finished", {{{"job_id", acme_job}, {"exit_code", 0}}}}}.dump());
  EXPECT_EQ(hijack.status, 403) << hijack.text;
  EXPECT_FALSE(hijack.body.contains("commands"));
  EXPECT_EQ(Call("GET", "/v1/jobs/" + std::to_string(acme_job), Admin()).body["state"],
            "SCHEDULED");
  // The other node reporting the acme job's events, logs and exit in its own heartbeat: none of
  // it is stored, nothing changes.
  json forged = {{"running", {acme_job}},
                 {"finished", {{{"job_id", acme_job}, {"exit_code", 0}}}},
                 {"events", {{{"job_id", acme_job}, {"type", "step"}, {"data", {{"step", 1}}}},
                             {{"job_id", globex_job}, {"type", "note"}, {"data", {{"x", 1}}}}}},
                 {"logs", {{{"job_id", acme_job}, {"rank", 0}, {"offset", 0}, {"data", "forged\n"}},
                           {{"job_id", globex_job}, {"rank", 0}, {"offset", 0}, {"data", "x\n"}}}}};
  Reply other = Call("POST", "/v1/agents/" + std::to_string(Ids()["node_other"]) + "/heartbeat",
                     Token(kNodeOther), forged.dump());
  EXPECT_EQ(other.status, 200) << other.text;
  for (int64_t id : {acme_job, globex_job}) {
    const std::string j = std::to_string(id);
    EXPECT_EQ(Call("GET", "/v1/jobs/" + j + "/logs", Admin()).text, "") << j;
    EXPECT_TRUE(Call("GET", "/v1/jobs/" + j + "/events?type=step", Admin()).body["events"].empty());
    EXPECT_TRUE(Call("GET", "/v1/jobs/" + j + "/events?type=note", Admin()).body["events"].empty());
  }
  EXPECT_EQ(Call("GET", "/v1/jobs/" + std::to_string(acme_job), Admin()).body["state"], "SCHEDULED");
  // The allocated node itself: its job's events are stored, the other tenant's job's are not.
  forged.erase("finished");
  forged.erase("running");
  Reply mine = Call("POST", "/v1/agents/" + alloc + "/heartbeat", Token(kNodeAllocated), forged.dump());
  EXPECT_EQ(mine.status, 200);
  EXPECT_EQ(Call("GET", "/v1/jobs/" + std::to_string(acme_job) + "/events?type=step", Admin())
                .body["events"].size(), 1u);
  EXPECT_TRUE(Call("GET", "/v1/jobs/" + std::to_string(globex_job) + "/events?type=note", Admin())
                  .body["events"].empty());
  EXPECT_EQ(Call("GET", "/v1/jobs/" + std::to_string(globex_job) + "/logs", Admin()).text, "");
  // Registering under another node's name with a node credential: 403. The join token may not
  // take a live node's name either: 409.
  json as_alloc = {{"name", "node-alloc"}, {"address", "127.0.0.1"}, {"cpu_slots", 8}};
  EXPECT_EQ(Call("POST", "/v1/agents/register", Token(kNodeOther), as_alloc.dump()).status, 403);
  EXPECT_EQ(Call("POST", "/v1/agents/register", Agent(), as_alloc.dump()).status, 409);
  // A cluster-admin token is not an agent credential.
  EXPECT_EQ(Call("POST", "/v1/agents/register", Admin(), as_alloc.dump()).status, 403);
}

TEST_F(TenancyTest, NothingNamesAnotherTenant) {
  // Only a cluster-admin's scrape gets the per-tenant series; the others are read once they exist.
  EXPECT_NE(MetricsHolding(Admin(), "tenant=\"globex\"").find("tenant=\"globex\""),
            std::string::npos);
  const std::string nodes = Call("GET", "/v1/nodes", Token(kViewer)).text;
  const std::string metrics = Call("GET", "/metrics", "").text;
  for (const std::string& secret : {std::string("globex"), std::string("acme"),
                                    std::string("acme-job"), std::string("globex-job")}) {
    EXPECT_EQ(nodes.find(secret), std::string::npos) << secret << " in " << nodes;
    EXPECT_EQ(metrics.find(secret), std::string::npos) << secret << " in /metrics";
  }
  EXPECT_EQ(Call("GET", "/metrics", Token(kTenantAdmin)).text.find("tenant="), std::string::npos);
}

TEST_F(TenancyTest, GrantsStayAtOrBelowTheGrantersRole) {
  const std::string acme = std::to_string(Ids()["acme"]);
  auto create = [&](Caller c, const std::string& role) {
    return Call("POST", "/v1/tokens", Token(c),
                json{{"role", role}, {"name", "g"}}.dump());
  };
  EXPECT_EQ(create(kTenantAdmin, "tenant-admin").status, 201);
  EXPECT_EQ(create(kTenantAdmin, "cluster-admin").status, 403);
  EXPECT_EQ(create(kTenantAdmin, "agent").status, 403);
  EXPECT_EQ(create(kTenantAdmin, "node").status, 403);
  EXPECT_EQ(create(kMember, "viewer").status, 403);
  EXPECT_EQ(create(kClusterAdmin, "node").status, 400);
  // The secret is returned once and only its digest is kept: the list never shows it.
  Reply made = create(kTenantAdmin, "viewer");
  ASSERT_EQ(made.status, 201);
  const std::string secret = made.body["token"];
  ASSERT_EQ(secret.size(), 64u);
  EXPECT_EQ(Call("GET", "/v1/tokens", Admin()).text.find(secret), std::string::npos);
  // It works at once; revoked, it stops at the next request.
  EXPECT_EQ(Call("GET", "/v1/whoami", secret).body["role"], "viewer");
  EXPECT_EQ(Call("DELETE", "/v1/tokens/" + made.body["id"].dump(), Token(kTenantAdmin)).status, 200);
  Reply after = Call("GET", "/v1/whoami", secret);
  EXPECT_EQ(after.status, 401);
  EXPECT_EQ(after.body["error"]["message"], "token revoked");
  EXPECT_EQ(Call("GET", "/v1/whoami", Token(kExpired)).body["error"]["message"], "token expired");
  // Bad input: clear 400s naming the field, nothing created.
  const size_t before = Call("GET", "/v1/tokens", Admin()).body["tokens"].size();
  EXPECT_EQ(Call("POST", "/v1/tokens", Admin(), R"({"role":"viewer"})").body["error"]["field"], "name");
  EXPECT_EQ(Call("POST", "/v1/tokens", Admin(),
                 R"({"role":"viewer","name":"x","expires_at":"2001-01-01T00:00:00Z"})")
                .body["error"]["field"], "expires_at");
  EXPECT_EQ(Call("POST", "/v1/tokens", Admin(), R"({"role":"viewer","name":"x","colour":1})")
                .body["error"]["field"], "colour");
  EXPECT_EQ(Call("POST", "/v1/tokens", Admin(), R"({"role":"viewer","name":"x","tenant_id":99999})")
                .status, 404);
  EXPECT_EQ(Call("GET", "/v1/tokens", Admin()).body["tokens"].size(), before);
}

// Hostile callers with tokens the server has already answered (so kept in its principal
// cache): an expired token and a revoked one are refused at once.
TEST_F(TenancyTest, DeadTokensAreRefusedEvenWhenTheServerHasSeenThem) {
  const std::string who = "/v1/whoami";
  Reply short_lived = Call("POST", "/v1/tokens", Admin(),
                           json{{"tenant_id", Ids()["acme"]}, {"role", "viewer"}, {"name", "brief"},
                                {"expires_at", common::FormatTimeMillis(common::NowMillis() + 1500)}}
                               .dump());
  ASSERT_EQ(short_lived.status, 201) << short_lived.text;
  const std::string brief = short_lived.body["token"];
  EXPECT_EQ(Call("GET", who, brief).status, 200);
  EXPECT_EQ(Call("GET", who, brief).status, 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(1600));
  Reply expired = Call("GET", who, brief);
  EXPECT_EQ(expired.status, 401);
  EXPECT_EQ(expired.body["error"]["message"], "token expired");

  const std::string self = CreateToken(Ids()["acme"], "member", "self-revoker");
  Reply me = Call("GET", who, self);
  ASSERT_EQ(me.status, 200);
  EXPECT_EQ(Call("DELETE", "/v1/tokens/" + me.body["token_id"].dump(), self).status, 200);
  EXPECT_EQ(Call("GET", who, self).body["error"]["message"], "token revoked");
}

// A token whose tenant an operator deleted by hand in PostgreSQL, after the server answered it:
// refused as soon as the database's notification arrives (db/principal_listener.h).
TEST_F(TenancyTest, TokensOfATenantDeletedByHandAreRefusedOnPostgres) {
  EMBODY_POSTGRES_ONLY();
  const std::string who = "/v1/whoami";
  const int64_t doomed = CreateTenant("doomed");
  const std::string orphan = CreateToken(doomed, "tenant-admin", "doomed-admin");
  EXPECT_EQ(Call("GET", who, orphan).status, 200);
  EXPECT_EQ(Call("GET", who, orphan).status, 200);
  auto deleted = pg_->Psql("BEGIN; DELETE FROM tokens WHERE tenant_id = " +
                           std::to_string(doomed) + "; DELETE FROM tenants WHERE id = " +
                           std::to_string(doomed) + "; COMMIT");
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  const auto start = std::chrono::steady_clock::now();
  Reply gone;
  while (std::chrono::steady_clock::now() - start < std::chrono::seconds(3)) {
    gone = Call("GET", who, orphan);
    if (gone.status != 200) break;
  }
  EXPECT_EQ(gone.status, 401);
  EXPECT_EQ(gone.body["error"]["message"], "unknown token");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
}

TEST_F(TenancyTest, TenantPatchRefusesStaleVersions) {
  const std::string path = "/v1/tenants/" + std::to_string(Ids()["globex"]);
  Reply got = Call("GET", path, Admin());
  ASSERT_EQ(got.status, 200);
  auto found = got.headers.find("ETag");
  const std::string etag = found == got.headers.end() ? "" : found->second;
  ASSERT_EQ(etag, "\"" + got.body["version"].dump() + "\"");
  Reply first = Call("PATCH", path, Admin(), R"({"weight": 3, "quota": {"pending_jobs": 50}})",
                     {{"If-Match", etag}});
  ASSERT_EQ(first.status, 200) << first.text;
  EXPECT_EQ(first.body["weight"], 3.0);
  EXPECT_EQ(first.body["quota"]["pending_jobs"], 50);
  EXPECT_TRUE(first.body["quota"]["slots"].is_null());
  // A second writer with the same (now stale) version is refused, and changes nothing.
  Reply stale = Call("PATCH", path, Admin(), R"({"weight": 9})", {{"If-Match", etag}});
  EXPECT_EQ(stale.status, 412) << stale.text;
  EXPECT_EQ(Call("GET", path, Admin()).body["weight"], 3.0);
  EXPECT_EQ(Call("PATCH", path, Admin(), R"({"weight": -1})").body["error"]["field"], "weight");
  EXPECT_EQ(Call("PATCH", path, Admin(), R"({"quota": {"slots": "8"}})").body["error"]["field"],
            "quota.slots");
  EXPECT_EQ(Call("PATCH", path, Admin(), R"({"name": "acme"})").status, 409);
  EXPECT_EQ(Call("POST", "/v1/tenants", Admin(), R"({"name": "Bad Name"})").status, 400);
}

TEST_F(TenancyTest, QuotasRefuseOrHoldSubmissions) {
  // A tenant allowed 2 pending jobs and 2-node jobs.
  Reply t = Call("POST", "/v1/tenants", Admin(),
                 R"({"name": "quota-co", "quota": {"pending_jobs": 2, "nodes_per_job": 2}})");
  ASSERT_EQ(t.status, 201) << t.text;
  const std::string member = CreateToken(t.body["id"], "member", "quota-member");
  EXPECT_EQ(Call("POST", "/v1/jobs", member, PendingSpec("q1").dump()).status, 201);
  EXPECT_EQ(Call("POST", "/v1/jobs", member, PendingSpec("q2").dump()).status, 201);
  Reply third = Call("POST", "/v1/jobs", member, PendingSpec("q3").dump());
  EXPECT_EQ(third.status, 429) << third.text;
  EXPECT_EQ(third.body["error"]["message"], "tenant quota: pending jobs 2/2");
  json wide = PendingSpec("wide");
  wide["resources"] = {{"nodes", 3}};
  Reply w = Call("POST", "/v1/jobs", member, wide.dump());
  EXPECT_EQ(w.status, 422) << w.text;
  EXPECT_EQ(w.body["error"]["message"],
            "never fits: asks for 3 nodes, the tenant's quota allows 2 nodes per job");
  EXPECT_EQ(w.body["error"]["field"], "resources.nodes");
  // Larger than any registered node (DOWN and draining ones count): the same words as a
  // pending job's reason, from the same function (job_fit.h).
  json huge = PendingSpec("huge");
  huge["resources"] = {{"nodes", 1}, {"ranks_per_node", 1000}};
  Reply h = Call("POST", "/v1/jobs", member, huge.dump());
  EXPECT_EQ(h.status, 422) << h.text;
  EXPECT_EQ(h.body["error"]["message"].get<std::string>().rfind(
                "never fits: needs 1 nodes with 1000 cpu slots each; the cluster has 0 such "
                "nodes of ",
                0),
            0u)
      << h.text;
  EXPECT_EQ(Call("GET", "/v1/tenants/" + t.body["id"].dump(), Admin()).body["usage"]["pending_jobs"],
            2);
}

TEST_F(TenancyTest, PriorityIsBoundedByTheTenantsMaxPriority) {
  Reply t = Call("POST", "/v1/tenants", Admin(),
                 R"({"name": "prio-co", "quota": {"max_priority": 40}})");
  ASSERT_EQ(t.status, 201) << t.text;
  EXPECT_EQ(t.body["quota"]["max_priority"], 40);
  const std::string member = CreateToken(t.body["id"], "member", "prio-member");
  const std::string admin = CreateToken(t.body["id"], "tenant-admin", "prio-admin");
  json spec = PendingSpec("p40");
  spec["priority"] = 40;
  EXPECT_EQ(Call("POST", "/v1/jobs", member, spec.dump()).status, 201);
  for (const std::string* who : {&member, &admin}) {
    spec["priority"] = 41;
    Reply over = Call("POST", "/v1/jobs", *who, spec.dump());
    EXPECT_EQ(over.status, 403) << over.text;
    EXPECT_EQ(over.body["error"]["field"], "priority");
    EXPECT_EQ(over.body["error"]["message"],
              "priority 41 is above this tenant's quota.max_priority 40");
  }
  // Out of range: refused, the tenant unchanged.
  Reply bad = Call("PATCH", "/v1/tenants/" + t.body["id"].dump(), Admin(),
                   R"({"quota": {"max_priority": 101}})");
  EXPECT_EQ(bad.status, 400) << bad.text;
  EXPECT_EQ(bad.body["error"]["field"], "quota.max_priority");
  // Unset: the server's default (100 here) applies.
  Reply unset = Call("PATCH", "/v1/tenants/" + t.body["id"].dump(), Admin(),
                     R"({"quota": {"max_priority": null}})");
  ASSERT_EQ(unset.status, 200) << unset.text;
  spec["priority"] = 100;
  EXPECT_EQ(Call("POST", "/v1/jobs", member, spec.dump()).status, 201);
}

// A monitoring token is what Prometheus needs and nothing more: service discovery and the
// server's tenant series, no jobs, no tenants; only a cluster-admin grants one.
TEST_F(TenancyTest, AMonitoringTokenReadsTargetsAndMetricsOnly) {
  Reply made = Call("POST", "/v1/tokens", Admin(),
                    json{{"tenant_id", Ids()["acme"]}, {"role", "monitoring"}, {"name", "prom"}}
                        .dump());
  ASSERT_EQ(made.status, 201) << made.text;
  const std::string prom = made.body["token"];
  EXPECT_EQ(Call("GET", "/v1/prometheus/targets", prom).status, 200);
  EXPECT_NE(MetricsHolding(prom, "embody_jobs{").find("embody_jobs{"), std::string::npos);
  EXPECT_EQ(Call("GET", "/metrics", Token(kMember)).text.find("embody_jobs{"), std::string::npos);
  EXPECT_EQ(Call("GET", "/v1/jobs", prom).status, 403);
  EXPECT_EQ(Call("GET", "/v1/tenants", prom).status, 403);
  EXPECT_EQ(Call("POST", "/v1/jobs", prom, PendingSpec("m").dump()).status, 403);
  // A tenant-admin cannot grant it.
  EXPECT_EQ(Call("POST", "/v1/tokens", Token(kTenantAdmin),
                 json{{"tenant_id", Ids()["acme"]}, {"role", "monitoring"}, {"name", "p2"}}.dump())
                .status,
            403);
}

TEST_F(TenancyTest, UsageReportsSlotHoursPerDayAndToken) {
  const std::string acme = std::to_string(Ids()["acme"]);
  // What the scheduler leader accounts (usage_accounting.h), written to the store directly, on
  // days long past: the stack's own scheduler accounts today's usage of the jobs it runs.
  {
    auto unit = Store().Begin();
    ASSERT_TRUE(unit.ok()) << unit.status().ToString();
    auto tokens = (*unit)->tenants().ListTokens(Ids()["acme"]);
    ASSERT_TRUE(tokens.ok()) << tokens.status().ToString();
    int64_t member_token = 0;
    for (const auto& t : *tokens) {
      if (t.name == "acme-member") member_token = t.id;
    }
    ASSERT_NE(member_token, 0);
    ASSERT_TRUE((*unit)->fair_share()
                    .AddDailyUsage({{Ids()["acme"], member_token, "2020-03-20", "cpu", 7200},
                                    {Ids()["acme"], 0, "2020-03-21", "gpu", 3600},
                                    {Ids()["globex"], 0, "2020-03-20", "cpu", 99}})
                    .ok());
    ASSERT_TRUE((*unit)->Commit().ok());
  }
  Reply r = Call("GET", "/v1/tenants/" + acme + "/usage?from=2020-03-01&to=2020-03-30",
                 Token(kViewer));
  ASSERT_EQ(r.status, 200) << r.text;
  ASSERT_EQ(r.body["days"].size(), 2u) << r.text;
  EXPECT_EQ(r.body["days"][0]["token_name"], "acme-member");
  EXPECT_EQ(r.body["days"][0]["slot_seconds"], 7200.0);
  EXPECT_TRUE(r.body["days"][1]["token_id"].is_null());
  EXPECT_EQ(r.body["total_slot_seconds"], 10800.0);
  EXPECT_EQ(r.body["slot_hours"]["gpu"], 1.0);
  // Outside the range: nothing. Bad dates: 400 naming the parameter.
  EXPECT_TRUE(Call("GET", "/v1/tenants/" + acme + "/usage?from=2020-04-01&to=2020-04-02",
                   Token(kViewer)).body["days"].empty());
  EXPECT_EQ(Call("GET", "/v1/tenants/" + acme + "/usage?from=2020-02-30", Token(kViewer))
                .body["error"]["field"], "from");
  EXPECT_EQ(Call("GET", "/v1/tenants/" + acme + "/usage?from=2020-03-05&to=2020-03-01",
                 Token(kViewer)).status, 400);
}

// A call that commits writes its audit row in its own transaction (service/audit_scope.h): the
// row and the job's first state event were created by one transaction id (the job row itself
// is rewritten by the scheduler with its waiting reason). The first submission of the
// server may be drafted with another status and amended (a later transaction); from then on
// the route's status is known and the row is final as committed.
TEST_F(TenancyTest, TheAuditRowCommitsWithTheChangeOnPostgres) {
  EMBODY_POSTGRES_ONLY();
  int64_t job = 0;
  for (int i = 0; i < 3; ++i) {
    Reply j = Call("POST", "/v1/jobs", Token(kMember), PendingSpec("audited").dump(),
                   {{"X-Request-Id", "in-tx-" + std::to_string(i)}});
    ASSERT_EQ(j.status, 201) << j.text;
    job = j.body["id"];
  }
  auto one = [](const std::string& sql) {
    auto out = pg_->Psql(sql);
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    std::string v = out.ok() ? *out : "";
    while (!v.empty() && v.back() == '\n') v.pop_back();
    return v;
  };
  const std::string row =
      one("SELECT status || ' ' || outcome || ' ' || target || ' ' || target_tenant_id"
          " FROM audit_log WHERE request_id = 'in-tx-2'");
  EXPECT_EQ(row, "201 ok job " + std::to_string(job) + " " + std::to_string(Ids()["acme"]));
  EXPECT_EQ(one("SELECT xmin FROM audit_log WHERE request_id = 'in-tx-2'"),
            one("SELECT xmin FROM job_events WHERE type = 'state' AND job_id = " +
                std::to_string(job) + " ORDER BY id LIMIT 1"));
  EXPECT_EQ(one("SELECT count(*) FROM audit_log WHERE request_id = 'in-tx-2'"), "1");
  // A row drafted otherwise than answered is amended, not doubled: the token route's handler
  // names its target only from the answer.
  Reply tok =
      Call("POST", "/v1/tokens", Admin(),
           json{{"tenant_id", Ids()["acme"]}, {"role", "viewer"}, {"name", "amended"}}.dump(),
           {{"X-Request-Id", "in-tx-token"}});
  ASSERT_EQ(tok.status, 201) << tok.text;
  EXPECT_EQ(one("SELECT count(*) || ' ' || min(status) || ' ' || min(target) FROM audit_log"
                " WHERE request_id = 'in-tx-token'"),
            "1 201 token " + tok.body["id"].dump() + " (viewer)");
  // A refusal before any transaction still gets its row, with its error code.
  Reply bad = Call("POST", "/v1/jobs", Token(kMember), "{", {{"X-Request-Id", "in-tx-bad"}});
  ASSERT_EQ(bad.status, 400);
  EXPECT_EQ(one("SELECT status || ' ' || outcome FROM audit_log WHERE request_id = 'in-tx-bad'"),
            "400 invalid_argument");
}

TEST_F(TenancyTest, EveryMutatingCallIsAudited) {
  const std::string rid = "audit-check-1";
  Call("POST", "/v1/jobs/" + std::to_string(Ids()["globex_job"]) + "/cancel", Token(kMember), "",
       {{"X-Request-Id", rid}});
  Call("POST", "/v1/tenants", "", R"({"name":"anon"})", {{"X-Request-Id", rid + "-anon"}});
  json entries = Call("GET", "/v1/audit?limit=50", Admin()).body["entries"];
  json refused, anonymous;
  for (const auto& e : entries) {
    if (e["request_id"] == rid) refused = e;
    if (e["request_id"] == rid + "-anon") anonymous = e;
  }
  ASSERT_FALSE(refused.is_null()) << entries.dump();
  EXPECT_EQ(refused["actor"], "acme-member");
  EXPECT_EQ(refused["role"], "member");
  EXPECT_EQ(refused["tenant"], "acme");
  EXPECT_EQ(refused["route"], "/v1/jobs/{id}/cancel");
  EXPECT_EQ(refused["status"], 404);
  EXPECT_EQ(refused["outcome"], "not_found");
  ASSERT_FALSE(anonymous.is_null());
  EXPECT_EQ(anonymous["actor"], "anonymous");
  EXPECT_EQ(anonymous["status"], 401);
  // Paginated, newest first.
  json page = Call("GET", "/v1/audit?limit=2", Admin()).body;
  ASSERT_EQ(page["entries"].size(), 2u);
  ASSERT_TRUE(page["next_cursor"].is_string());
  json next = Call("GET", "/v1/audit?limit=2&cursor=" + page["next_cursor"].get<std::string>(),
                   Admin()).body;
  EXPECT_LT(next["entries"][0]["id"].get<int64_t>(), page["entries"][1]["id"].get<int64_t>() + 1);
}

}  // namespace
}  // namespace controlplane
