// A property test of the whole HTTP API, on both stores (server_test_fixture.h): random and mutated
// requests (bodies, headers, paths, query strings, methods, tokens of every kind) are sent to an
// in-process server, and every answer must be
//   - a success, or a 4xx whose body is our JSON error ({"error": {"code", "message"}}): never a
//     5xx, never a dropped connection;
//   - for an operation docs/api/openapi.yaml gives: a status it documents, with a body that
//     follows that status's schema;
//   - for a refusal (4xx) or any GET: nothing stored. The rows only requests write (tenants,
//     tokens, jobs, nodes, job logs) are fingerprinted before and after each such request.
// Requests start from valid ones (so mutations reach deep into the handlers) and are mutated at
// the JSON level (values of other types and extreme sizes, keys removed or added) and the byte
// level. EMBODY_HTTP_FUZZ_SEED and EMBODY_HTTP_FUZZ_REQUESTS change the run; a failure prints
// the seed and the request.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <utility>

#include "controlplane/db/pg.h"
#include "controlplane/testing/server_test_fixture.h"
#include "tests/support/documented_response.h"

namespace controlplane {
namespace {

using nlohmann::json;

struct Request {
  std::string method;
  std::string path;
  std::string token;
  std::string body;
  httplib::Headers headers;

  std::string Describe() const {
    std::ostringstream o;
    o << method << " " << path << "\n";
    auto quoted = [](const std::string& s) {
      return json(s).dump(-1, ' ', false, json::error_handler_t::replace);
    };
    for (const auto& [k, v] : headers) o << k << ": " << quoted(v) << "\n";
    o << "token: " << quoted(token) << "\nbody: " << quoted(body);
    return o.str();
  }
};

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}

  size_t Below(size_t n) {
    return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng_);
  }
  bool OneIn(size_t n) { return Below(n) == 0; }
  template <typename T>
  T Pick(const std::vector<T>& v) {
    return v[Below(v.size())];
  }

  // A JSON value of any type, biased to the ones parsers get wrong.
  json Value(int depth = 0) {
    switch (Below(depth > 2 ? 9 : 11)) {
      case 0:
        return nullptr;
      case 1:
        return OneIn(2);
      case 2:
        return Pick<int64_t>({0, -1, 1, 63, 64, 65, 1023, 1024, 1LL << 31, -(1LL << 31), INT64_MAX,
                              INT64_MIN, 1000000001});
      case 3:
        return Pick<uint64_t>({UINT64_MAX, 1ULL << 63, (1ULL << 63) + 1});
      case 4:
        return Pick<double>({0.5, -0.0, 1e30, -1e30, 1e308, 4.9e-324, 3.0, 2.5e9});
      case 5:
        return Text();
      case 6:
        return std::string(Below(3000), static_cast<char>('a' + Below(26)));
      case 7:
        return Pick<std::string>({"", "true", "null", "1", "gpu", "cluster-admin", "node", "agent",
                                  "tenant-admin", "2027-01-01T00:00:00Z", "1969-12-31T23:59:59Z",
                                  "PENDING", "../../etc/passwd"});
      case 8:
        return json::array();
      case 9: {
        json a = json::array();
        for (size_t i = Below(4); i > 0; --i) a.push_back(Value(depth + 1));
        return a;
      }
      default: {
        json o = json::object();
        for (size_t i = Below(4); i > 0; --i) o[Key()] = Value(depth + 1);
        return o;
      }
    }
  }

  // Short strings with the characters that break storage and logs: NUL, control characters,
  // quotes, non-ASCII, lone surrogates written as escapes by the byte mutator elsewhere.
  std::string Text() {
    static const std::vector<std::string> pieces = {"a",
                                                    "Z",
                                                    "0",
                                                    "-",
                                                    "_",
                                                    ".",
                                                    " ",
                                                    "\"",
                                                    "\\",
                                                    "/",
                                                    "%",
                                                    "'",
                                                    ";",
                                                    "\n",
                                                    "\t",
                                                    "\x01",
                                                    std::string(1, '\0'),
                                                    "\x7f",
                                                    "\xc3\xa9",
                                                    "\xf0\x9f\x98\x80",
                                                    "\xe2\x80\xae",
                                                    "{",
                                                    "$1"};
    std::string s;
    for (size_t i = Below(12); i > 0; --i) s += Pick(pieces);
    return s;
  }

  std::string Key() {
    static const std::vector<std::string> keys = {"name",
                                                  "kind",
                                                  "resources",
                                                  "nodes",
                                                  "ranks_per_node",
                                                  "slot_type",
                                                  "slots_per_rank",
                                                  "memory_per_rank_bytes",
                                                  "priority",
                                                  "max_restarts",
                                                  "time_limit_seconds",
                                                  "engine",
                                                  "command",
                                                  "model",
                                                  "optim",
                                                  "steps",
                                                  "data",
                                                  "weight",
                                                  "quota",
                                                  "slots",
                                                  "pending_jobs",
                                                  "running_jobs",
                                                  "nodes_per_job",
                                                  "role",
                                                  "tenant_id",
                                                  "expires_at",
                                                  "address",
                                                  "cpu_slots",
                                                  "gpus",
                                                  "isolation",
                                                  "running",
                                                  "finished",
                                                  "events",
                                                  "logs",
                                                  "job_id",
                                                  "rank",
                                                  "offset",
                                                  "type",
                                                  "exit_code",
                                                  "seed",
                                                  "unknown",
                                                  ""};
    return OneIn(8) ? Text() : Pick(keys);
  }

  // Replaces, removes or adds one member somewhere in `j`.
  void MutateJson(json& j, int depth = 0) {
    if ((j.is_object() || j.is_array()) && !j.empty() && !OneIn(3) && depth < 6) {
      if (j.is_object()) {
        auto it = j.begin();
        std::advance(it, Below(j.size()));
        if (OneIn(6)) {
          j.erase(it);
          return;
        }
        return MutateJson(it.value(), depth + 1);
      }
      return MutateJson(j[Below(j.size())], depth + 1);
    }
    if (j.is_object() && OneIn(2)) {
      j[Key()] = Value();
    } else if (j.is_array() && OneIn(2)) {
      j.push_back(Value());
    } else {
      j = Value();
    }
  }

  void MutateBytes(std::string& s) {
    static const std::vector<std::string> inserts = {"\\u0000",
                                                     "\\ud800",
                                                     "\xff",
                                                     "\xc3",
                                                     "\"",
                                                     "{",
                                                     "}",
                                                     "[",
                                                     "]",
                                                     ",",
                                                     ":",
                                                     "1e999",
                                                     "-",
                                                     std::string(1, '\0'),
                                                     std::string(200, '['),
                                                     "\\"};
    for (size_t n = 1 + Below(3); n > 0; --n) {
      const size_t at = Below(s.size() + 1);
      switch (Below(5)) {
        case 0:
          if (!s.empty()) s[Below(s.size())] ^= static_cast<char>(1 << Below(8));
          break;
        case 1:
          s.insert(at, Pick(inserts));
          break;
        case 2:
          s.erase(at, Below(16));
          break;
        case 3:
          s.resize(at);
          break;
        default:
          s.insert(at, s.substr(Below(s.size() + 1), Below(64)));
          break;
      }
    }
  }

  // Percent-encoded bytes of any value, or a plain token; for path segments and query values.
  std::string UrlPiece() {
    switch (Below(6)) {
      case 0:
        return std::to_string(static_cast<int64_t>(Below(40)));
      case 1:
        return Pick<std::string>({"0", "-1", "99999999999999999999", "9223372036854775807", "1e3",
                                  "", "abc", "%00", "%ff", "%c3%28", "..", "%2e%2e", "PENDING",
                                  "2026-01-02T03:04:05Z", "loss,loss"});
      case 2: {
        std::string s;
        for (size_t i = Below(8); i > 0; --i) {
          static const char* hex = "0123456789abcdef";
          const unsigned b = static_cast<unsigned>(Below(256));
          s += '%';
          s += hex[b >> 4];
          s += hex[b & 15];
        }
        return s;
      }
      case 3:
        return std::string(Below(5000), 'x');
      default:
        return std::to_string(static_cast<int64_t>(Below(1u << 20)));
    }
  }

  // Header values httplib's client will send (no CR, LF or NUL), bytes above 0x7f included.
  std::string HeaderValue() {
    std::string s = OneIn(3) ? std::string(Below(400), 'k') : "";
    for (size_t i = Below(24); i > 0; --i) {
      char c = static_cast<char>(0x20 + Below(0xe0));
      if (OneIn(8)) c = static_cast<char>(0x80 + Below(0x80));
      s += c;
    }
    return s;
  }

 private:
  std::mt19937_64 rng_;
};

// As the server reads a path: %XX decoded.
std::string PercentDecoded(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

class ApiFuzzTest : public ServerTest {
 protected:
  static void SetUpTestSuite() {
    // A dashboard of one page, so that paths outside the API get what they get in production
    // (where an unbuilt dashboard is a 503 of its own).
    std::string tmpl = "/tmp/embody-fuzz-web-XXXXXX";
    web_dir_ = new std::string(mkdtemp(tmpl.data()));
    std::ofstream(*web_dir_ + "/index.html") << "<!doctype html><title>Embody</title>\n";
    // Every audited call leaves a row, anonymous refusals included (no budget per address here:
    // audit_budget_test.cc has it).
    StartServer("fuzz", 1000, *web_dir_,
                [](ServerOptions& o) { o.audit_anonymous_burst = 1'000'000; });
  }
  static void TearDownTestSuite() {
    ServerTest::TearDownTestSuite();
    if (web_dir_) std::filesystem::remove_all(*web_dir_);
    delete web_dir_;
    web_dir_ = nullptr;
  }

  // What requests alone write, fingerprinted: whole rows of tenants and tokens, and the columns
  // of jobs and nodes that the scheduler and heartbeats' liveness never change.
  static std::string Snapshot() {
    return ServerSuiteOnPostgres() ? PgSnapshot() : MemorySnapshot();
  }
  static int64_t AuditRows() {
    return ServerSuiteOnPostgres() ? PgAuditRows() : MemoryAuditRows();
  }

  // Read through the store: a tenant's version counts its updates; a token's mutable fields are
  // its expiry and revocation.
  static std::string MemorySnapshot() {
    auto unit = Store().Begin();
    EXPECT_TRUE(unit.ok()) << unit.status().ToString();
    if (!unit.ok()) return "";
    service::UnitOfWork& u = **unit;
    std::ostringstream s;
    auto tenants = u.tenants().ListTenants(std::nullopt);
    auto tokens = u.tenants().ListTokens(std::nullopt);
    service::JobQuery all;
    all.limit = 1 << 30;
    auto jobs = u.jobs().List(all);
    auto nodes = u.nodes().List();
    EXPECT_TRUE(tenants.ok() && tokens.ok() && jobs.ok() && nodes.ok());
    if (!tenants.ok() || !tokens.ok() || !jobs.ok() || !nodes.ok()) return "";
    s << "tenants=";
    for (const auto& t : *tenants) s << t.id << "/" << t.name << "/" << t.version << ",";
    s << " tokens=";
    for (const auto& t : *tokens) {
      s << t.id << "/" << t.tenant_id << "/" << t.role << "/" << t.name << "/" << t.node_id << "/"
        << t.expires_ms.value_or(-1) << "/" << t.revoked_ms.value_or(-1) << ",";
    }
    s << " jobs=";
    int64_t log_bytes = 0;
    for (const auto& j : *jobs) {
      s << j.id << "/" << j.tenant_id << "/" << j.name << "/" << j.priority << "/" << j.spec.dump()
        << "/" << j.request_sha256 << ",";
      auto logs = u.logs().ForJob(j.id);
      EXPECT_TRUE(logs.ok()) << logs.status().ToString();
      if (logs.ok()) {
        for (const auto& l : *logs) log_bytes += l.bytes;
      }
    }
    s << " nodes=";
    for (const auto& n : *nodes) {
      s << n.id << "/" << n.name << "/" << n.address << "/" << n.agent_url << "/" << n.cpu_slots
        << "/" << n.gpus.dump() << "/" << n.draining << ",";
    }
    s << " logs=" << log_bytes;
    return s.str();
  }

  static int64_t MemoryAuditRows() {
    auto unit = Store().Begin();
    EXPECT_TRUE(unit.ok()) << unit.status().ToString();
    if (!unit.ok()) return -1;
    service::AuditQuery all;
    all.limit = 1 << 30;
    auto rows = (*unit)->audit().List(all);
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    return rows.ok() ? static_cast<int64_t>(rows->size()) : -1;
  }
  // On PostgreSQL, read with SQL in one statement: a snapshot per request stays cheap however
  // many jobs exist.
  static std::string PgSnapshot() {
    auto lease = Pool().Acquire();
    EXPECT_TRUE(lease.ok());
    if (!lease.ok()) return "";
    auto rows = db::Exec(lease->get(), R"(SELECT
      (SELECT count(*) || ':' || coalesce(md5(string_agg(t::text, ',' ORDER BY id)), '')
         FROM tenants t) AS tenants,
      (SELECT count(*) || ':' || coalesce(md5(string_agg(t::text, ',' ORDER BY id)), '')
         FROM tokens t) AS tokens,
      (SELECT count(*) || ':' || coalesce(md5(string_agg(concat_ws('/', id, tenant_id, name,
         priority, spec::text, idempotency_key), ',' ORDER BY id)), '') FROM jobs) AS jobs,
      (SELECT count(*) || ':' || coalesce(md5(string_agg(concat_ws('/', id, name, address,
         agent_url, cpu_slots, gpus::text, draining), ',' ORDER BY id)), '') FROM nodes) AS nodes,
      (SELECT count(*) || ':' || coalesce(sum(bytes), 0) FROM job_logs) AS logs)");
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    if (!rows.ok()) return "";
    std::string s;
    for (const char* c : {"tenants", "tokens", "jobs", "nodes", "logs"}) {
      s += std::string(c) + "=" + rows->Str(0, c) + " ";
    }
    return s;
  }

  static int64_t PgAuditRows() {
    auto lease = Pool().Acquire();
    EXPECT_TRUE(lease.ok());
    if (!lease.ok()) return -1;
    auto rows = db::Exec(lease->get(), "SELECT count(*) AS n FROM audit_log");
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    return rows.ok() ? rows->Int(0, "n") : -1;
  }

  static db::PgPool& Pool() { return *store_pool_; }

  static Reply Send(const Request& q) {
    httplib::Client cli("127.0.0.1", server_->port());
    cli.set_read_timeout(30, 0);
    httplib::Headers headers = q.headers;
    if (!q.token.empty()) headers.emplace("Authorization", "Bearer " + q.token);
    const char* type = "application/json";
    httplib::Result res = q.method == "GET"      ? cli.Get(q.path, headers)
                          : q.method == "PATCH"  ? cli.Patch(q.path, headers, q.body, type)
                          : q.method == "PUT"    ? cli.Put(q.path, headers, q.body, type)
                          : q.method == "DELETE" ? cli.Delete(q.path, headers, q.body, type)
                                                 : cli.Post(q.path, headers, q.body, type);
    Reply r;
    if (!res) return r;
    r.status = res->status;
    r.text = res->body;
    r.headers = res->headers;
    r.body = json::parse(res->body, nullptr, false);
    return r;
  }

  static inline std::string* web_dir_ = nullptr;
};

// What the random run found once, kept as fixed cases: each was a 5xx, a non-JSON answer or a
// call missing from the audit log.
TEST_F(ApiFuzzTest, FoundCases) {
  const std::string admin = Admin();
  const std::string spec = PendingSpec("found").dump();
  auto expect_refused = [&](const Request& q, int status, const std::string& field) {
    const std::string before = Snapshot();
    Reply r = Send(q);
    EXPECT_EQ(r.status, status) << q.Describe() << "\n-> " << r.text;
    EXPECT_TRUE(r.body.is_object() && r.body.contains("error")) << r.text;
    if (!field.empty()) {
      EXPECT_EQ(r.body["error"].value("field", ""), field) << r.text;
    }
    EXPECT_EQ(Snapshot(), before) << q.Describe();
  };
  // Bytes that are not UTF-8 reached PostgreSQL as text (500).
  expect_refused({"POST", "/v1/jobs", admin, spec, {{"Idempotency-Key", "\xdc\xcf"}}}, 400,
                 "Idempotency-Key");
  expect_refused({"GET", "/v1/jobs?q=%fd%55", admin, "", {}}, 400, "");
  // A NUL in an argv entry reached jsonb (500).
  json nul = PendingSpec("nul");
  nul["command"] = {std::string("a\0", 2)};
  expect_refused({"POST", "/v1/jobs", admin, nul.dump(), {}}, 400, "command[0]");
  // A newline in the decoded path escaped the catch-all route; an over-long URI is refused by
  // httplib itself: both were answered without a body.
  expect_refused({"GET", "/v1/%0a", admin, "", {}}, 404, "");
  expect_refused({"GET", "/v1/" + std::string(9000, 'x'), admin, "", {}}, 414, "");
  // A path that is not UTF-8 made the audit row fail: the call went unaudited.
  const int64_t audit_before = AuditRows();
  Reply r = Send({"POST", "/v1/%ff%c3%28/x%00y", admin, "{}", {}});
  EXPECT_EQ(r.status, 404) << r.text;
  EXPECT_EQ(AuditRows(), audit_before + 1);
  Reply audit = Call("GET", "/v1/audit?limit=1", admin);
  ASSERT_EQ(audit.status, 200) << audit.text;
  ASSERT_EQ(audit.body["entries"].size(), 1u);
  EXPECT_EQ(audit.body["entries"][0]["path"], "/v1/%FF%C3(/x%00y");
  EXPECT_EQ(audit.body["entries"][0]["outcome"], "not_found");
}

TEST_F(ApiFuzzTest, NoServerErrorsAndRefusalsStoreNothing) {
  const char* seed_env = std::getenv("EMBODY_HTTP_FUZZ_SEED");
  const char* n_env = std::getenv("EMBODY_HTTP_FUZZ_REQUESTS");
  const uint64_t seed = seed_env ? std::strtoull(seed_env, nullptr, 10) : std::random_device{}();
  const int requests = n_env ? std::atoi(n_env) : 1500;
  SCOPED_TRACE("EMBODY_HTTP_FUZZ_SEED=" + std::to_string(seed));
  Mutator m(seed);

  // Who calls: every kind of credential, and some that are not credentials at all.
  const std::string admin = Admin();
  Reply other = Call("POST", "/v1/tenants", admin, R"({"name":"fuzz-other"})");
  ASSERT_EQ(other.status, 201) << other.text;
  const int64_t other_tenant = other.body["id"];
  auto make_token = [&](const std::string& role, int64_t tenant) {
    Reply r = Call("POST", "/v1/tokens", admin,
                   json{{"role", role}, {"name", "fuzz-" + role}, {"tenant_id", tenant}}.dump());
    EXPECT_EQ(r.status, 201) << r.text;
    return std::make_pair(r.body.value("id", int64_t{0}), r.body.value("token", std::string()));
  };
  const int64_t home_tenant = Call("GET", "/v1/whoami", admin).body.value("tenant_id", int64_t{1});
  auto tenant_admin = make_token("tenant-admin", home_tenant);
  auto member = make_token("member", home_tenant);
  auto viewer = make_token("viewer", home_tenant);
  auto other_member = make_token("member", other_tenant);
  auto revoked = make_token("member", home_tenant);
  ASSERT_EQ(Call("DELETE", "/v1/tokens/" + std::to_string(revoked.first), admin).status, 200);
  const int64_t node = RegisterNode("fuzz-node", 4);
  ASSERT_EQ(Call("POST", "/v1/nodes/" + std::to_string(node) + "/drain", admin).status, 200);
  // Ids a DELETE /v1/tokens/{id} must not take away, or the rest of the run tests only 401s.
  std::set<int64_t> kept_tokens = {tenant_admin.first, member.first, viewer.first,
                                   other_member.first};
  for (const auto& t : Call("GET", "/v1/tokens", admin).body["tokens"]) {
    kept_tokens.insert(t["id"].get<int64_t>());
  }

  const std::vector<std::string> tokens = {admin,
                                           admin,
                                           tenant_admin.second,
                                           member.second,
                                           member.second,
                                           viewer.second,
                                           other_member.second,
                                           revoked.second,
                                           NodeToken(node),
                                           Agent(),
                                           "",
                                           "not-a-token",
                                           std::string(64, 'f'),
                                           admin + "x",
                                           std::string(5000, 'a')};
  std::vector<int64_t> jobs;
  for (int i = 0; i < 3; ++i) {
    Reply r =
        Call("POST", "/v1/jobs", member.second, PendingSpec("fuzz-" + std::to_string(i)).dump());
    ASSERT_EQ(r.status, 201) << r.text;
    jobs.push_back(r.body["id"]);
  }
  jobs.push_back(999999);
  const std::vector<int64_t> nodes = {node, 1, 999999};
  const std::vector<int64_t> tenants = {home_tenant, other_tenant, 999999};

  // Valid requests of every route, the starting points of mutation.
  auto seed_request = [&]() -> Request {
    const std::string job = std::to_string(m.Pick(jobs));
    const std::string nd = std::to_string(m.Pick(nodes));
    const std::string tn = std::to_string(m.Pick(tenants));
    const std::string suffix = std::to_string(m.Below(1u << 30));
    switch (m.Below(25)) {
      case 0:
      case 1:
        return {"POST", "/v1/jobs", member.second, PendingSpec("f" + suffix).dump(), {}};
      case 2:
        return {"POST",
                "/v1/jobs",
                member.second,
                json{{"name", "t" + suffix},
                     {"kind", "train"},
                     {"resources", {{"nodes", 1}, {"ranks_per_node", 64}}},
                     {"engine",
                      {{"model", {{"d_model", 64}, {"heads", 4}}},
                       {"optim", {{"steps", 10}, {"lr", 0.001}}}}}}
                    .dump(),
                {{"Idempotency-Key", "k" + std::to_string(m.Below(8))}}};
      case 3:
        return {"GET", "/v1/jobs?limit=5&state=PENDING&q=f", member.second, "", {}};
      case 4:
        return {"GET", "/v1/jobs/" + job, viewer.second, "", {}};
      case 5:
        return {"GET", "/v1/jobs/" + job + "/events?after=0&limit=10", member.second, "", {}};
      case 6:
        return {"GET",
                "/v1/jobs/" + job + "/metrics?names=loss&since=0&max_points=10",
                member.second,
                "",
                {}};
      case 7:
        return {"GET", "/v1/jobs/" + job + "/logs?rank=0", member.second, "", {}};
      case 8:
        return {"POST", "/v1/jobs/" + job + "/cancel", member.second, "", {}};
      case 9:
        return {"GET", "/v1/nodes", viewer.second, "", {}};
      case 10:
        return {"POST", "/v1/nodes/" + nd + "/drain", admin, "", {}};
      case 11:
        return {"POST",
                "/v1/agents/register",
                Agent(),
                json{{"name", "fz-" + suffix},
                     {"address", "127.0.0.1"},
                     {"cpu_slots", 2},
                     {"gpus", json::array({{{"index", 0}, {"name", "g"}, {"memory_bytes", 1}}})}}
                    .dump(),
                {}};
      case 12:
        return {
            "POST",
            "/v1/agents/" + nd + "/heartbeat",
            NodeToken(node),
            json{{"running", json::array({m.Pick(jobs)})},
                 {"finished", json::array({{{"job_id", m.Pick(jobs)}, {"exit_code", 0}}})},
                 {"events", json::array({{{"job_id", m.Pick(jobs)},
                                          {"type", "step"},
                                          {"time_ms", 1},
                                          {"data", {{"step", 1}}}}})},
                 {"logs",
                  json::array(
                      {{{"job_id", m.Pick(jobs)}, {"rank", 0}, {"offset", 0}, {"data", "x\n"}}})}}
                .dump(),
            {}};
      case 13:
        return {"POST",
                "/v1/tenants",
                admin,
                json{{"name", "t" + suffix},
                     {"weight", 2},
                     {"quota", {{"slots", 8}, {"pending_jobs", 100}}}}
                    .dump(),
                {}};
      case 14:
        return {"GET", "/v1/tenants/" + tn, tenant_admin.second, "", {}};
      case 15:
        return {"PATCH",
                "/v1/tenants/" + tn,
                admin,
                json{{"weight", 1.5}, {"quota", {{"running_jobs", nullptr}}}}.dump(),
                {{"If-Match", m.OneIn(2) ? "*" : std::to_string(m.Below(4))}}};
      case 16:
        return {
            "POST",
            "/v1/tokens",
            tenant_admin.second,
            json{{"role", "viewer"}, {"name", "v" + suffix}, {"expires_at", "2099-01-01T00:00:00Z"}}
                .dump(),
            {}};
      case 17:
        return {"GET", "/v1/tokens?tenant_id=" + tn, tenant_admin.second, "", {}};
      case 18:
        return {"DELETE", "/v1/tokens/" + std::to_string(m.Below(64)), tenant_admin.second, "", {}};
      case 19:
        return {"GET", "/v1/audit?limit=5&cursor=" + suffix, tenant_admin.second, "", {}};
      case 20:
        return {"GET",
                m.Pick<std::string>({"/v1/whoami", "/healthz", "/readyz", "/metrics",
                                     "/v1/prometheus/targets", "/v1/tenants"}),
                admin,
                "",
                {}};
      case 21:
        return {"POST",
                "/v1/jobs/" + job + "/checkpoints",
                m.OneIn(2) ? NodeToken(node) : member.second,
                json{{"step", m.Below(1000)},
                     {"bytes", m.Below(1u << 20)},
                     {"sha256", std::string(64, 'a')},
                     {"metrics", {{"loss", 0.5}}}}
                    .dump(),
                {}};
      case 22:
        return {"PUT",
                "/v1/jobs/" + job + "/checkpoints/" + std::to_string(m.Below(8)) +
                    "/data?offset=" + std::to_string(m.Below(4)),
                NodeToken(node),
                "chunk" + suffix,
                {{"X-Content-Sha256", std::string(64, 'b')}}};
      case 23:
        return {m.Pick<std::string>({"GET", "DELETE"}),
                "/v1/jobs/" + job + "/checkpoints/" + std::to_string(m.Below(8)) +
                    m.Pick<std::string>({"", "/commit"}),
                m.OneIn(2) ? viewer.second : NodeToken(node),
                "",
                {}};
      default:
        return {"GET", "/v1/" + m.UrlPiece() + "/" + m.UrlPiece(), admin, "", {}};
    }
  };

  auto mutate = [&](Request& q) {
    if (!q.body.empty() && m.OneIn(2)) {
      json j = json::parse(q.body, nullptr, false);
      if (!j.is_discarded()) {
        for (size_t i = 1 + m.Below(3); i > 0; --i) m.MutateJson(j);
        q.body = j.dump(-1, ' ', false, json::error_handler_t::replace);
      }
    }
    if (m.OneIn(4)) m.MutateBytes(q.body);
    if (m.OneIn(5)) q.token = m.Pick(tokens);
    if (m.OneIn(6)) q.method = m.Pick<std::string>({"GET", "POST", "PUT", "DELETE", "PATCH"});
    if (m.OneIn(5)) {
      // A path segment or the query string replaced.
      const size_t slash = q.path.rfind('/');
      if (m.OneIn(2) && slash != std::string::npos) {
        q.path = q.path.substr(0, slash + 1) + m.UrlPiece();
      } else {
        const std::string base = q.path.substr(0, q.path.find('?'));
        q.path = base + "?" +
                 m.Pick<std::string>({"limit", "cursor", "state", "tenant_id", "after", "type",
                                      "names", "since", "max_points", "rank", "q", "follow"}) +
                 "=" + m.UrlPiece();
        if (q.path.find("follow=1") != std::string::npos) q.path += "0";  // streams never end
      }
    }
    if (m.OneIn(4)) {
      q.headers.emplace(m.Pick<std::string>({"Idempotency-Key", "If-Match", "X-Request-Id",
                                             "Content-Type", "Authorization"}),
                        m.HeaderValue());
    }
  };

  const std::vector<embody::testing::Operation> documented =
      embody::testing::ApiDocument().ok()
          ? embody::testing::Operations(*embody::testing::ApiDocument())
          : std::vector<embody::testing::Operation>{};
  int refusals = 0, successes = 0;
  std::map<int, int> by_status;
  for (int i = 0; i < requests; ++i) {
    Request q = seed_request();
    if (!m.OneIn(5)) mutate(q);
    if (q.method == "DELETE" && q.path.rfind("/v1/tokens/", 0) == 0) {
      try {
        if (kept_tokens.count(std::stoll(PercentDecoded(q.path.substr(11))))) {
          q.path = "/v1/tokens/999999";
        }
      } catch (const std::exception&) {
      }
    }
    const std::string before = Snapshot();
    // Every call that reaches a route and is not a GET or a heartbeat leaves one audit row,
    // refusals included, whatever bytes its path holds.
    const std::string route_path = PercentDecoded(q.path.substr(0, q.path.find('?')));
    const bool audited = q.method != "GET" &&
                         !std::regex_match(route_path, std::regex(R"(/v1/agents/\d+/heartbeat)"));
    const int64_t audit_before = audited ? AuditRows() : 0;
    const Reply r = Send(q);
    ++by_status[r.status];
    // An answer of an operation the document gives is held to it; garbage that reaches no
    // documented operation (an unknown route, a method no route has) is what the document
    // deliberately leaves out, and httplib's own 414 comes before any route.
    if (r.status != 414 && embody::testing::ApiDocument().ok() &&
        embody::testing::MatchOperation(documented, q.method, q.path) != nullptr) {
      ExpectDocumented(q.method, q.path, r);
    }
    ASSERT_NE(r.status, 0) << "no answer to request " << i << ":\n" << q.Describe();
    ASSERT_LT(r.status, 500) << "request " << i << ":\n" << q.Describe() << "\n-> " << r.text;
    // Logs and /metrics are text; paths outside the API are the dashboard's pages.
    const bool text_route = q.path.find("/logs") != std::string::npos ||
                            q.path.rfind("/metrics", 0) == 0 || route_path.rfind("/v1/", 0) != 0;
    if (r.status >= 400) {
      ++refusals;
      ASSERT_TRUE(r.body.is_object() && r.body.contains("error") && r.body["error"].is_object() &&
                  r.body["error"].value("code", "") != "" && r.body["error"].contains("message"))
          << "request " << i << " answered " << r.status << " without a JSON error:\n"
          << q.Describe() << "\n-> " << r.text;
    } else {
      ++successes;
      if (!text_route) {
        ASSERT_FALSE(r.body.is_discarded()) << "request " << i << ": success that is not JSON:\n"
                                            << q.Describe() << "\n-> " << r.text;
      }
    }
    // httplib refuses an over-long URI (414) before any route runs.
    if (audited && r.status != 414) {
      ASSERT_EQ(AuditRows(), audit_before + 1)
          << "request " << i << " answered " << r.status << " and left no audit row:\n"
          << q.Describe();
    }
    if (r.status >= 400 || q.method == "GET") {
      const std::string after = Snapshot();
      ASSERT_EQ(before, after) << "request " << i << " answered " << r.status
                               << " and changed stored state:\n"
                               << q.Describe();
    }
  }
  std::ostringstream statuses;
  for (const auto& [s, n] : by_status) statuses << s << ":" << n << " ";
  std::printf("seed %llu: %d requests, %d refused, %d succeeded; statuses %s\n",
              static_cast<unsigned long long>(seed), requests, refusals, successes,
              statuses.str().c_str());
  // A run that only collected refusals would prove little.
  EXPECT_GT(successes, requests / 10);
  EXPECT_GT(refusals, requests / 10);
}

}  // namespace
}  // namespace controlplane
