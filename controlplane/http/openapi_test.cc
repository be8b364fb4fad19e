// docs/api/openapi.yaml kept true to the server: every route the server registers is documented
// and nothing else is, every example follows its schema, error examples carry a code whose HTTP
// status is the one they are documented under, and nothing a v1 client relies on has gone from
// the released document (docs/api/openapi.v1.baseline.yaml) unless the major version changed.
// No network: the server is built but never bound.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "controlplane/http/api_server.h"
#include "common/http/status_http.h"
#include "tests/support/json_schema.h"
#include "tests/support/openapi_document.h"

namespace controlplane::http {
namespace {

using embody::testing::CompatibilityBreaks;
using embody::testing::Member;
using embody::testing::Operations;
using embody::testing::ValidateJson;
using nlohmann::json;

// A database every call to which fails: building the server's routes touches none.
class NoDatabase : public service::Database {
 public:
  common::Result<std::unique_ptr<service::UnitOfWork>> Begin() override {
    return common::Unavailable("no database in this test");
  }
};

std::set<std::string> ServedRoutes() {
  NoDatabase db;
  service::LogFiles logs("/nonexistent");
  auto now = [] { return int64_t{0}; };
  service::JobsService jobs(db, api::SpecLimits{}, now, nullptr);
  service::NodeService nodes(db, logs, 1000, now, nullptr);
  service::TenantsService tenants(db, now);
  service::TokensService tokens(db, now);
  service::DatasetsService datasets(db, "", now, nullptr);
  ServerMetrics metrics;
  ApiDeps deps;
  deps.db = &db;
  deps.jobs = &jobs;
  deps.nodes = &nodes;
  deps.tenants = &tenants;
  deps.tokens = &tokens;
  deps.datasets = &datasets;
  deps.metrics = &metrics;
  deps.now_ms = now;
  ApiServer server(deps);
  std::set<std::string> out;
  for (const auto& r : server.Routes()) {
    if (r.pattern != kUnmatchedRoute) out.insert(r.method + " " + r.pattern);
  }
  return out;
}

json Load(const std::string& relative) {
  auto doc = embody::testing::LoadYamlFile(std::string(EMBODY_SOURCE_DIR) + "/" + relative);
  EXPECT_TRUE(doc.ok()) << doc.status().ToString();
  return doc.ok() ? *doc : json::object();
}

const json& Document() {
  static const json doc = Load("docs/api/openapi.yaml");
  return doc;
}

std::string Lines(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& l : v) s += "  " + l + "\n";
  return s;
}

TEST(OpenApiTest, EveryServedRouteIsDocumentedAndNothingElse) {
  const std::set<std::string> served = ServedRoutes();
  // The server has its health routes, jobs, nodes, tenants, tokens and agents: a router that
  // recorded nothing would make the comparison below empty.
  ASSERT_GT(served.size(), 20u);
  ASSERT_TRUE(served.count("GET /healthz"));
  // An operation served by a route named other than by its path (the dashboard's "web", one
  // route for every non-API path) names that route in x-route-pattern.
  std::set<std::string> documented;
  for (const auto& op : Operations(Document())) {
    documented.insert(op.method + " " + op.op.value("x-route-pattern", op.path));
  }
  std::vector<std::string> missing, extra;
  for (const auto& r : served) {
    if (!documented.count(r)) missing.push_back(r);
  }
  for (const auto& r : documented) {
    if (!served.count(r)) extra.push_back(r);
  }
  EXPECT_TRUE(missing.empty()) << "served but not in docs/api/openapi.yaml:\n" << Lines(missing);
  EXPECT_TRUE(extra.empty()) << "in docs/api/openapi.yaml but not served:\n" << Lines(extra);
}

TEST(OpenApiTest, EveryOperationNamesItsRolesAndShowsASuccess) {
  for (const auto& op : Operations(Document())) {
    const std::string name = op.method + " " + op.path;
    EXPECT_TRUE(op.op.contains("x-roles") && op.op["x-roles"].is_array() &&
                !op.op["x-roles"].empty())
        << name << ": no x-roles";
    EXPECT_NE(op.op.value("description", "").find("Roles:"), std::string::npos)
        << name << ": the description does not name the roles";
    EXPECT_TRUE(op.op.contains("operationId")) << name;
    bool success_example = false;
    for (const auto& [status, r] : Member(op.op, "responses").items()) {
      if (status[0] != '2') continue;
      const json* resp = embody::testing::Deref(Document(), r);
      ASSERT_NE(resp, nullptr) << name << " " << status;
      for (const auto& [type, media] : Member(*resp, "content").items()) {
        success_example =
            success_example || media.contains("example") || media.contains("examples");
      }
    }
    EXPECT_TRUE(success_example) << name << ": no example of a successful response";
  }
}

TEST(OpenApiTest, EveryExampleFollowsItsSchema) {
  const auto examples = embody::testing::Examples(Document());
  ASSERT_GT(examples.size(), 40u);
  for (const auto& e : examples) {
    EXPECT_FALSE(e.value.is_null() && !e.schema.value("nullable", false))
        << e.where << ": empty example (a dangling $ref?)";
    if (e.schema.value("type", "") == "string" && e.value.is_string()) continue;
    const auto errors = ValidateJson(e.value, e.schema, Document());
    EXPECT_TRUE(errors.empty()) << e.where << ":\n" << Lines(errors);
  }
}

TEST(OpenApiTest, ErrorExamplesCarryACodeOfTheirStatus) {
  std::set<std::string> documented_codes;
  for (const json& c : Document()["components"]["schemas"]["ErrorCode"]["enum"]) {
    documented_codes.insert(c.get<std::string>());
  }
  std::map<std::string, int> status_of;
  for (int c = static_cast<int>(common::Code::kInvalidArgument);
       c <= static_cast<int>(common::Code::kInternal); ++c) {
    const auto code = static_cast<common::Code>(c);
    status_of[common::CodeName(code)] = common::http::HttpStatusFor(code);
    EXPECT_TRUE(documented_codes.count(common::CodeName(code)))
        << common::CodeName(code) << " is not in ErrorCode";
  }
  EXPECT_EQ(documented_codes.size(), status_of.size());
  int checked = 0;
  for (const auto& e : embody::testing::Examples(Document())) {
    // JSON errors only: the dashboard's 503 when it is not built is a line of text.
    if (e.status < 400 || e.where.find("application/json") == std::string::npos) continue;
    const std::string code = e.value["error"].value("code", "");
    ASSERT_TRUE(status_of.count(code)) << e.where << ": unknown code " << code;
    EXPECT_EQ(status_of[code], e.status)
        << e.where << ": " << code << " is HTTP " << status_of[code];
    ++checked;
  }
  EXPECT_GT(checked, 20);
}

TEST(OpenApiTest, CompatibleWithTheReleasedV1Document) {
  const json baseline = Load("docs/api/openapi.v1.baseline.yaml");
  ASSERT_EQ(embody::testing::MajorVersion(baseline), 1);
  if (embody::testing::MajorVersion(Document()) != embody::testing::MajorVersion(baseline)) {
    GTEST_SKIP() << "a new major version may break v1 clients";
  }
  const auto breaks = CompatibilityBreaks(baseline, Document());
  EXPECT_TRUE(breaks.empty()) << "breaks v1 clients (raise info.version's major to allow):\n"
                              << Lines(breaks);
}

// The compatibility check itself, on edits of the real document.
TEST(OpenApiTest, CompatibilityCheckCatchesBreaks) {
  const json& doc = Document();
  EXPECT_TRUE(CompatibilityBreaks(doc, doc).empty()) << Lines(CompatibilityBreaks(doc, doc));

  json gone = doc;
  gone["paths"].erase("/v1/audit");
  EXPECT_EQ(CompatibilityBreaks(doc, gone),
            std::vector<std::string>{"GET /v1/audit: route removed"});

  json no_field = doc;
  no_field["components"]["schemas"]["Tenant"]["properties"].erase("weight");
  auto breaks = CompatibilityBreaks(doc, no_field);
  ASSERT_FALSE(breaks.empty());
  EXPECT_NE(breaks[0].find("weight: field removed"), std::string::npos) << breaks[0];

  json retyped = doc;
  retyped["components"]["schemas"]["Job"]["properties"]["id"]["type"] = "string";
  breaks = CompatibilityBreaks(doc, retyped);
  ASSERT_FALSE(breaks.empty());
  EXPECT_NE(breaks[0].find("id: type changed from \"integer\" to \"string\""), std::string::npos)
      << breaks[0];

  json nested = doc;  // deep inside a list response, behind two $refs
  nested["components"]["schemas"]["Node"]["properties"]["gpus"]["items"] = {{"type", "string"}};
  EXPECT_FALSE(CompatibilityBreaks(doc, nested).empty());

  json required = doc;
  required["components"]["schemas"]["TokenCreate"]["required"].push_back("tenant_id");
  breaks = CompatibilityBreaks(doc, required);
  ASSERT_EQ(breaks.size(), 1u) << Lines(breaks);
  EXPECT_EQ(breaks[0], "POST /v1/tokens request $.tenant_id: newly required");

  json param = doc;
  param["paths"]["/v1/jobs"]["get"]["parameters"][2]["required"] = true;
  EXPECT_EQ(CompatibilityBreaks(doc, param).size(), 1u);

  json added = doc;  // additions are compatible
  added["components"]["schemas"]["Tenant"]["properties"]["labels"] = {{"type", "object"}};
  added["paths"]["/v1/extra"] = doc["paths"]["/healthz"];
  EXPECT_TRUE(CompatibilityBreaks(doc, added).empty()) << Lines(CompatibilityBreaks(doc, added));

  // One of several shapes: compatible while one alternative is the old shape, unbroken.
  const json job_ref = {{"$ref", "#/components/schemas/Job"}};
  const json health_ref = {{"$ref", "#/components/schemas/Health"}};
  json one_of = doc;
  json& job = one_of["paths"]["/v1/jobs/{id}"]["get"]["responses"]["200"]["content"]
                    ["application/json"]["schema"];
  job = {{"oneOf", {job_ref, health_ref}}};
  EXPECT_TRUE(CompatibilityBreaks(doc, one_of).empty()) << Lines(CompatibilityBreaks(doc, one_of));
  job = {{"oneOf", {health_ref}}};
  EXPECT_FALSE(CompatibilityBreaks(doc, one_of).empty());
}

// The validator the example test relies on, shown to refuse what it must.
TEST(JsonSchemaTest, RefusesWhatTheSchemaForbids) {
  const json& doc = Document();
  const json job_ref = {{"$ref", "#/components/schemas/Job"}};
  const json job = doc["components"]["examples"]["RunningJob"]["value"];
  EXPECT_TRUE(ValidateJson(job, job_ref, doc).empty());

  json bad = job;
  bad["state"] = "SLEEPING";
  bad["attempt"] = "0";
  bad.erase("tenant");
  bad["spec"]["resources"]["nodes"] = 0;
  bad["spec"]["surprise"] = 1;
  bad["allocation"][0]["ranks"] = 1.5;
  bad["last_step"] = nullptr;   // nullable: fine
  bad["created_at"] = nullptr;  // not nullable
  const auto errors = ValidateJson(bad, job_ref, doc);
  const std::string all = Lines(errors);
  EXPECT_EQ(errors.size(), 7u) << all;
  for (const char* want :
       {"$.state: \"SLEEPING\" is not one of", "$.attempt: string where integer",
        "required field \"tenant\" is missing", "$.spec.resources.nodes: 0 is below the minimum 1",
        "$.spec.surprise: field not allowed here", "$.allocation[0].ranks: number where integer",
        "$.created_at: null where string"}) {
    EXPECT_NE(all.find(want), std::string::npos) << want << "\n" << all;
  }
  EXPECT_FALSE(ValidateJson(1, {{"$ref", "#/components/schemas/Nope"}}, doc).empty());
  EXPECT_FALSE(ValidateJson(1, {{"oneOf", json::array()}}, doc).empty());

  // oneOf: a gate's threshold is a number or another step's metric, nothing else.
  const json when = doc["components"]["schemas"]["PipelineSubmit"]["properties"]["steps"]["items"]
                       ["properties"]["when"];
  json gate = {{"step", "eval"}, {"metric", "success_rate"}, {"at_least", 0.8}};
  EXPECT_TRUE(ValidateJson(gate, when, doc).empty()) << Lines(ValidateJson(gate, when, doc));
  gate["at_least"] = {{"step", "base"}, {"metric", "success_rate"}, {"minus", 0.05}};
  EXPECT_TRUE(ValidateJson(gate, when, doc).empty()) << Lines(ValidateJson(gate, when, doc));
  gate["at_least"] = "high";
  const auto one_of = ValidateJson(gate, when, doc);
  ASSERT_EQ(one_of.size(), 1u) << Lines(one_of);
  EXPECT_NE(one_of[0].find("$.at_least: \"high\" matches 0 of the 2 oneOf alternatives"),
            std::string::npos)
      << one_of[0];
  gate["at_least"] = {{"step", "base"}, {"metric", "success_rate"}, {"surprise", 1}};
  EXPECT_FALSE(ValidateJson(gate, when, doc).empty());
}

TEST(YamlTest, ScalarsKeepTheirTypes) {
  auto j = embody::testing::ParseYaml(
      "a: 1\nb: 1.5\nc: '1'\nd: true\ne: null\nf: x\ng: [1, \"2\"]\nh: &x {k: v}\ni: *x\n");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ(j->dump(), R"({"a":1,"b":1.5,"c":"1","d":true,"e":null,"f":"x","g":[1,"2"],)"
                       R"("h":{"k":"v"},"i":{"k":"v"}})");
}

}  // namespace
}  // namespace controlplane::http
