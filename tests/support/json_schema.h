// A validator for the subset of JSON Schema that OpenAPI 3.0 documents use here: type, nullable,
// enum, properties, required, additionalProperties, items, minimum, maximum, oneOf (exactly one
// alternative holds) and local $ref ("#/components/schemas/Job"). Annotations (description, format, default, example, title) are
// accepted and ignored; any other keyword is reported as unsupported, so a document cannot rely on
// a rule this validator would silently skip. Test-only.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace embody::testing {

// j[key] when `j` is an object holding it, else an empty object: safe to iterate with .items()
// (nlohmann's value() returns a temporary that a range-for over items() would outlive).
const nlohmann::json& Member(const nlohmann::json& j, const std::string& key);

// The value at a local JSON pointer ("#/components/schemas/Job") in `root`; null when absent.
const nlohmann::json* ResolvePointer(const nlohmann::json& root, const std::string& ref);

// Follows $ref chains from `node` until an object without $ref; null on a dangling reference.
const nlohmann::json* Deref(const nlohmann::json& root, const nlohmann::json& node);

// Checks `value` against `schema` ($refs resolved in `root`). Returns one line per violation,
// each starting with the path of the offending value ("$.jobs[0].state: ..."); empty: valid.
std::vector<std::string> ValidateJson(const nlohmann::json& value, const nlohmann::json& schema,
                                      const nlohmann::json& root);

}  // namespace embody::testing
