// The check the HTTP suites' fixture runs on every answer: which operation a concrete path is,
// and what of a response the document does not give.
#include "tests/support/documented_response.h"

#include <gtest/gtest.h>

namespace embody::testing {
namespace {

using nlohmann::json;

json Doc() {
  auto doc = ParseYaml(R"(
openapi: 3.0.3
paths:
  /:
    get:
      responses:
        "200":
          description: page
          content:
            text/html:
              schema: {type: string}
  /metrics:
    get:
      responses:
        "200":
          description: text
          content:
            text/plain:
              schema: {type: string}
  /v1/jobs/{id}:
    get:
      responses:
        "200":
          description: job
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Job"}
        "404": {$ref: "#/components/responses/NotFound"}
    delete:
      responses:
        "204": {description: gone}
  /v1/jobs/batch:
    get:
      responses:
        "200":
          description: batch
          content:
            application/json:
              schema: {type: array}
components:
  schemas:
    Job:
      type: object
      required: [id, state]
      properties:
        id: {type: integer}
        state: {type: string, enum: [PENDING, RUNNING]}
  responses:
    NotFound:
      description: none
      content:
        application/json:
          schema:
            type: object
            required: [error]
            properties: {error: {type: object}}
)");
  EXPECT_TRUE(doc.ok()) << doc.status().ToString();
  return doc.ok() ? *doc : json::object();
}

std::string Lines(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& l : v) s += l + "\n";
  return s;
}

TEST(DocumentedResponseTest, LiteralSegmentsWinAndQueriesAreIgnored) {
  const json doc = Doc();
  const auto ops = Operations(doc);
  const Operation* batch = MatchOperation(ops, "GET", "/v1/jobs/batch?limit=3");
  ASSERT_NE(batch, nullptr);
  EXPECT_EQ(batch->path, "/v1/jobs/batch");
  const Operation* job = MatchOperation(ops, "GET", "/v1/jobs/17");
  ASSERT_NE(job, nullptr);
  EXPECT_EQ(job->path, "/v1/jobs/{id}");
  EXPECT_EQ(MatchOperation(ops, "GET", "/v1/jobs/"), nullptr);  // {id} is never empty
}

TEST(DocumentedResponseTest, PathsOutsideTheApiAreTheDashboard) {
  const json doc = Doc();
  const auto ops = Operations(doc);
  ASSERT_NE(MatchOperation(ops, "GET", "/jobs/17"), nullptr);
  EXPECT_EQ(MatchOperation(ops, "GET", "/jobs/17")->path, "/");
  EXPECT_EQ(MatchOperation(ops, "GET", "/v1/nothing"), nullptr);
  EXPECT_EQ(MatchOperation(ops, "POST", "/jobs/17"), nullptr);
  EXPECT_EQ(MatchOperation(ops, "GET", "/metrics")->path, "/metrics");
}

TEST(DocumentedResponseTest, DocumentedAnswersPass) {
  const json doc = Doc();
  EXPECT_EQ(
      Lines(ResponseViolations(doc, "GET", "/v1/jobs/3", 200, "application/json; charset=utf-8",
                               R"({"id": 3, "state": "PENDING"})")),
      "");
  EXPECT_EQ(Lines(ResponseViolations(doc, "GET", "/v1/jobs/3", 404, "application/json",
                                     R"({"error": {"code": "not_found"}})")),
            "");
  EXPECT_EQ(Lines(ResponseViolations(doc, "DELETE", "/v1/jobs/3", 204, "", "")), "");
  EXPECT_EQ(Lines(ResponseViolations(doc, "GET", "/metrics", 200, "text/plain; version=0.0.4",
                                     "# TYPE x gauge\n")),
            "");
}

TEST(DocumentedResponseTest, WhatTheDocumentDoesNotGiveIsReported) {
  const json doc = Doc();
  // A field off its enum, a required field missing.
  auto e = ResponseViolations(doc, "GET", "/v1/jobs/3", 200, "application/json",
                              R"({"id": 3, "state": "LOST"})");
  EXPECT_NE(Lines(e).find("$.state"), std::string::npos) << Lines(e);
  e = ResponseViolations(doc, "GET", "/v1/jobs/3", 200, "application/json", R"({"id": 3})");
  EXPECT_NE(Lines(e).find("state"), std::string::npos) << Lines(e);
  // A status, an operation, a media type the document does not give; a body that is not JSON.
  e = ResponseViolations(doc, "GET", "/v1/jobs/3", 409, "application/json", "{}");
  EXPECT_NE(Lines(e).find("status not documented"), std::string::npos) << Lines(e);
  e = ResponseViolations(doc, "PATCH", "/v1/jobs/3", 200, "application/json", "{}");
  EXPECT_NE(Lines(e).find("no operation"), std::string::npos) << Lines(e);
  e = ResponseViolations(doc, "GET", "/metrics", 200, "application/json", "{}");
  EXPECT_NE(Lines(e).find("media type"), std::string::npos) << Lines(e);
  e = ResponseViolations(doc, "GET", "/v1/jobs/3", 200, "application/json", "{\"id\":");
  EXPECT_NE(Lines(e).find("not JSON"), std::string::npos) << Lines(e);
  e = ResponseViolations(doc, "DELETE", "/v1/jobs/3", 204, "text/plain", "gone");
  EXPECT_NE(Lines(e).find("gives none"), std::string::npos) << Lines(e);
}

TEST(DocumentedResponseTest, ParsedValuesAreHeldToTheJsonSchema) {
  const json doc = Doc();
  EXPECT_EQ(Lines(JsonResponseViolations(doc, "GET", "/v1/jobs/{id}", 200,
                                         json{{"id", 1}, {"state", "RUNNING"}})),
            "");
  EXPECT_NE(Lines(JsonResponseViolations(doc, "GET", "/v1/jobs/{id}", 200, json{{"id", "one"}})),
            "");
  EXPECT_NE(Lines(JsonResponseViolations(doc, "GET", "/metrics", 200, json::object())), "");
}

TEST(DocumentedResponseTest, TheProjectsDocumentLoads) {
  const auto& doc = ApiDocument();
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  EXPECT_EQ(&ApiDocument(), &doc);  // read once
  const auto ops = Operations(*doc);
  const Operation* op = MatchOperation(ops, "GET", "/v1/jobs/42");
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->path, "/v1/jobs/{id}");
}

}  // namespace
}  // namespace embody::testing
