#include "tests/support/json_schema.h"

#include <set>

namespace embody::testing {

using nlohmann::json;

namespace {

const std::set<std::string>& KnownKeywords() {
  static const std::set<std::string> k = {
      "type",    "nullable", "enum",    "properties", "required",    "additionalProperties",
      "items",   "minimum",  "maximum", "$ref",       "oneOf",       "description",
      "format",  "default",  "example", "title",      "readOnly",    "writeOnly",
      "deprecated"};
  return k;
}

bool HasType(const json& v, const std::string& type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "boolean") return v.is_boolean();
  if (type == "integer") return v.is_number_integer();
  if (type == "number") return v.is_number();
  return false;
}

std::string Kind(const json& v) {
  if (v.is_number_integer()) return "integer";
  if (v.is_number()) return "number";
  return v.type_name();
}

void Validate(const json& v, const json& schema, const json& root, const std::string& at, int depth,
              std::vector<std::string>* errors) {
  if (depth > 64) {
    errors->push_back(at + ": schema nests too deep (a $ref cycle?)");
    return;
  }
  if (!schema.is_object()) {
    errors->push_back(at + ": schema is not an object");
    return;
  }
  if (schema.contains("$ref")) {
    const json* target = Deref(root, schema);
    if (!target) {
      errors->push_back(at + ": dangling $ref " + schema["$ref"].dump());
      return;
    }
    Validate(v, *target, root, at, depth + 1, errors);
    return;
  }
  for (auto it = schema.begin(); it != schema.end(); ++it) {
    if (!KnownKeywords().count(it.key()) && it.key().rfind("x-", 0) != 0) {
      errors->push_back(at + ": schema keyword \"" + it.key() + "\" is not supported");
    }
  }
  if (v.is_null()) {
    if (!schema.value("nullable", false) && schema.contains("type")) {
      errors->push_back(at + ": null where " + schema["type"].get<std::string>() + " expected");
    }
    return;
  }
  if (schema.contains("oneOf")) {
    // Exactly one alternative holds ("a number or {step, metric}"); the errors of each are not
    // repeated: which one was meant is the writer's to say.
    int holding = 0;
    for (const json& alternative : schema["oneOf"]) {
      std::vector<std::string> alternative_errors;
      Validate(v, alternative, root, at, depth + 1, &alternative_errors);
      holding += alternative_errors.empty() ? 1 : 0;
    }
    if (holding != 1) {
      errors->push_back(at + ": " + v.dump() + " matches " + std::to_string(holding) + " of the " +
                        std::to_string(schema["oneOf"].size()) + " oneOf alternatives");
    }
  }
  if (schema.contains("type")) {
    const std::string type = schema["type"].get<std::string>();
    if (!HasType(v, type)) {
      errors->push_back(at + ": " + Kind(v) + " where " + type + " expected");
      return;
    }
  }
  if (schema.contains("enum")) {
    bool found = false;
    for (const json& e : schema["enum"]) found = found || e == v;
    if (!found) errors->push_back(at + ": " + v.dump() + " is not one of " + schema["enum"].dump());
  }
  if (v.is_number()) {
    if (schema.contains("minimum") && v.get<double>() < schema["minimum"].get<double>()) {
      errors->push_back(at + ": " + v.dump() + " is below the minimum " + schema["minimum"].dump());
    }
    if (schema.contains("maximum") && v.get<double>() > schema["maximum"].get<double>()) {
      errors->push_back(at + ": " + v.dump() + " is above the maximum " + schema["maximum"].dump());
    }
  }
  if (v.is_object()) {
    const json props = schema.value("properties", json::object());
    for (const json& r : schema.value("required", json::array())) {
      if (!v.contains(r.get<std::string>())) {
        errors->push_back(at + ": required field \"" + r.get<std::string>() + "\" is missing");
      }
    }
    for (auto it = v.begin(); it != v.end(); ++it) {
      const std::string child = at + "." + it.key();
      if (props.contains(it.key())) {
        Validate(it.value(), props[it.key()], root, child, depth + 1, errors);
      } else if (schema.contains("additionalProperties")) {
        const json& extra = schema["additionalProperties"];
        if (extra.is_boolean()) {
          if (!extra.get<bool>()) errors->push_back(child + ": field not allowed here");
        } else {
          Validate(it.value(), extra, root, child, depth + 1, errors);
        }
      }
    }
  }
  if (v.is_array() && schema.contains("items")) {
    for (size_t i = 0; i < v.size(); ++i) {
      Validate(v[i], schema["items"], root, at + "[" + std::to_string(i) + "]", depth + 1, errors);
    }
  }
}

}  // namespace

const json& Member(const json& j, const std::string& key) {
  static const json kEmpty = json::object();
  return j.is_object() && j.contains(key) ? j[key] : kEmpty;
}

const json* ResolvePointer(const json& root, const std::string& ref) {
  if (ref.rfind("#/", 0) != 0) return nullptr;
  const json* node = &root;
  size_t start = 2;
  while (start <= ref.size()) {
    size_t slash = ref.find('/', start);
    std::string token =
        ref.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    // JSON pointer escapes: ~1 is '/', ~0 is '~'.
    for (size_t p; (p = token.find("~1")) != std::string::npos;) token.replace(p, 2, "/");
    for (size_t p; (p = token.find("~0")) != std::string::npos;) token.replace(p, 2, "~");
    if (!node->is_object() || !node->contains(token)) return nullptr;
    node = &(*node)[token];
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return node;
}

const json* Deref(const json& root, const json& node) {
  const json* n = &node;
  for (int hops = 0; n->is_object() && n->contains("$ref"); ++hops) {
    if (hops > 32 || !(*n)["$ref"].is_string()) return nullptr;
    n = ResolvePointer(root, (*n)["$ref"].get<std::string>());
    if (!n) return nullptr;
  }
  return n;
}

std::vector<std::string> ValidateJson(const json& value, const json& schema, const json& root) {
  std::vector<std::string> errors;
  Validate(value, schema, root, "$", 0, &errors);
  return errors;
}

}  // namespace embody::testing
