// Reading docs/api/openapi.yaml in tests: YAML to JSON (yaml-cpp), the operations it documents,
// every example with the schema it claims to follow, and the v1 compatibility rules between a
// released document and a newer one. Test-only.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace embody::testing {

// Parses YAML into JSON. Plain scalars become null, booleans, integers or floats where YAML 1.2's
// core schema reads them so; quoted scalars stay strings. Aliases are expanded.
common::Result<nlohmann::json> ParseYaml(const std::string& text);
common::Result<nlohmann::json> LoadYamlFile(const std::string& path);

struct Operation {
  std::string method;  // "GET", "POST", ...
  std::string path;    // "/v1/jobs/{id}"
  nlohmann::json op;   // the operation object
};
std::vector<Operation> Operations(const nlohmann::json& doc);

struct Example {
  std::string where;  // "GET /v1/jobs responses.200 application/json examples.jobList"
  nlohmann::json value;
  nlohmann::json schema;  // may hold a $ref into the document
  int status = 0;         // the response status it illustrates; 0 for requests and schemas
};
// Every example in the document: of media types (example and examples, $refs followed), of
// parameters and headers, and those written on schemas.
std::vector<Example> Examples(const nlohmann::json& doc);

// The schema of an operation's JSON response for `status` ($refs followed); null when the
// document has none.
const nlohmann::json* ResponseSchema(const nlohmann::json& doc, const Operation& op, int status);

int MajorVersion(const nlohmann::json& doc);

// What in `current` breaks a client written against `baseline`: a route gone, a success response
// gone, a response field removed, retyped, made nullable or no longer always present, a request
// field or parameter newly required or retyped, a request field no longer accepted. One line
// each; empty when compatible. Ignores versions: the caller allows breaks on a new major.
std::vector<std::string> CompatibilityBreaks(const nlohmann::json& baseline,
                                             const nlohmann::json& current);

}  // namespace embody::testing
