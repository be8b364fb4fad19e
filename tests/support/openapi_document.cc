#include "tests/support/openapi_document.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "tests/support/json_schema.h"

namespace embody::testing {

using nlohmann::json;

namespace {

const char* const kMethods[] = {"get", "put", "post", "delete", "patch", "head", "options"};

json ScalarToJson(const YAML::Node& n) {
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return s;  // quoted: always a string
  static const std::regex kInt(R"([-+]?[0-9]+)");
  static const std::regex kFloat(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (std::regex_match(s, kInt)) {
    try {
      return std::stoll(s);
    } catch (const std::exception&) {
      return s;
    }
  }
  if (std::regex_match(s, kFloat)) return std::stod(s);
  return s;
}

json ToJson(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
      return nullptr;
    case YAML::NodeType::Scalar:
      return ScalarToJson(n);
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (const auto& item : n) a.push_back(ToJson(item));
      return a;
    }
    case YAML::NodeType::Map: {
      json o = json::object();
      for (const auto& kv : n) o[kv.first.Scalar()] = ToJson(kv.second);
      return o;
    }
    case YAML::NodeType::Undefined:
      break;
  }
  return nullptr;
}

std::string Upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), ::toupper);
  return s;
}

const json& Or(const json* p) {
  static const json kNull;
  return p ? *p : kNull;
}

// Media-type examples: `example`, or `examples` whose entries hold `value` or a $ref to one.
void MediaExamples(const json& doc, const json& media, const std::string& where, int status,
                   std::vector<Example>* out) {
  if (!media.is_object() || !media.contains("schema")) return;
  if (media.contains("example"))
    out->push_back({where + " example", media["example"], media["schema"], status});
  for (const auto& [name, ex] : Member(media, "examples").items()) {
    const json& e = Or(Deref(doc, ex));
    out->push_back(
        {where + " examples." + name, e.value("value", json()), media["schema"], status});
  }
}

void SchemaExamples(const json& schema, const std::string& where, std::vector<Example>* out) {
  if (schema.is_object()) {
    if (schema.contains("example") && !schema.contains("$ref")) {
      out->push_back({where + " example", schema["example"], schema, 0});
    }
    for (const auto& [k, v] : schema.items()) {
      if (k != "example" && k != "enum" && k != "default") SchemaExamples(v, where + "." + k, out);
    }
  } else if (schema.is_array()) {
    for (size_t i = 0; i < schema.size(); ++i) SchemaExamples(schema[i], where, out);
  }
}

std::string TypeOf(const json& s) { return s.value("type", std::string()); }

void CompareResponse(const json& base_doc, const json& cur_doc, const json& b_in, const json& c_in,
                     const std::string& at, int depth, std::vector<std::string>* breaks) {
  const json* b = Deref(base_doc, b_in);
  const json* c = Deref(cur_doc, c_in);
  if (!b || !c || depth > 32) return;
  // A response that became one of several shapes keeps its clients when one alternative is the
  // old shape unbroken: the others answer only requests those clients never make (a new query
  // parameter), which the response's description must say.
  if (c->contains("oneOf") && !b->contains("oneOf")) {
    std::vector<std::string> fewest;
    bool first = true;
    for (const json& alternative : (*c)["oneOf"]) {
      std::vector<std::string> these;
      CompareResponse(base_doc, cur_doc, b_in, alternative, at, depth + 1, &these);
      if (first || these.size() < fewest.size()) fewest = std::move(these);
      first = false;
    }
    breaks->insert(breaks->end(), fewest.begin(), fewest.end());
    return;
  }
  if (TypeOf(*b) != TypeOf(*c)) {
    breaks->push_back(at + ": type changed from \"" + TypeOf(*b) + "\" to \"" + TypeOf(*c) + "\"");
    return;
  }
  if (!b->value("nullable", false) && c->value("nullable", false)) {
    breaks->push_back(at + ": may now be null");
  }
  const json b_props = b->value("properties", json::object());
  const json c_props = c->value("properties", json::object());
  std::set<std::string> c_required;
  for (const json& r : c->value("required", json::array())) c_required.insert(r.get<std::string>());
  for (const json& r : b->value("required", json::array())) {
    if (!c_required.count(r.get<std::string>()) && c_props.contains(r.get<std::string>())) {
      breaks->push_back(at + "." + r.get<std::string>() + ": no longer always present");
    }
  }
  for (const auto& [name, bs] : b_props.items()) {
    if (!c_props.contains(name)) {
      breaks->push_back(at + "." + name + ": field removed");
      continue;
    }
    CompareResponse(base_doc, cur_doc, bs, c_props[name], at + "." + name, depth + 1, breaks);
  }
  if (b->contains("items") && c->contains("items")) {
    CompareResponse(base_doc, cur_doc, (*b)["items"], (*c)["items"], at + "[]", depth + 1, breaks);
  }
  const json& b_extra = b->value("additionalProperties", json());
  const json& c_extra = c->value("additionalProperties", json());
  if (b_extra.is_object() && c_extra.is_object()) {
    CompareResponse(base_doc, cur_doc, b_extra, c_extra, at + ".*", depth + 1, breaks);
  }
}

void CompareRequest(const json& base_doc, const json& cur_doc, const json& b_in, const json& c_in,
                    const std::string& at, int depth, std::vector<std::string>* breaks) {
  const json* b = Deref(base_doc, b_in);
  const json* c = Deref(cur_doc, c_in);
  if (!b || !c || depth > 32) return;
  if (TypeOf(*b) != TypeOf(*c)) {
    breaks->push_back(at + ": type changed from \"" + TypeOf(*b) + "\" to \"" + TypeOf(*c) + "\"");
    return;
  }
  std::set<std::string> b_required;
  for (const json& r : b->value("required", json::array())) b_required.insert(r.get<std::string>());
  for (const json& r : c->value("required", json::array())) {
    if (!b_required.count(r.get<std::string>())) {
      breaks->push_back(at + "." + r.get<std::string>() + ": newly required");
    }
  }
  const json b_props = b->value("properties", json::object());
  const json c_props = c->value("properties", json::object());
  const bool closed = c->contains("additionalProperties") && c->at("additionalProperties") == false;
  for (const auto& [name, bs] : b_props.items()) {
    if (!c_props.contains(name)) {
      if (closed) breaks->push_back(at + "." + name + ": no longer accepted");
      continue;
    }
    CompareRequest(base_doc, cur_doc, bs, c_props[name], at + "." + name, depth + 1, breaks);
  }
  if (b->contains("items") && c->contains("items")) {
    CompareRequest(base_doc, cur_doc, (*b)["items"], (*c)["items"], at + "[]", depth + 1, breaks);
  }
}

const json* JsonMedia(const json& doc, const json& holder) {
  const json* h = Deref(doc, holder);
  if (!h || !h->contains("content")) return nullptr;
  const json& content = (*h)["content"];
  return content.contains("application/json") ? &content["application/json"] : nullptr;
}

// Parameters by "in:name", $refs followed.
std::map<std::string, json> Params(const json& doc, const json& op) {
  std::map<std::string, json> out;
  for (const json& p : op.value("parameters", json::array())) {
    const json* r = Deref(doc, p);
    if (r) out[r->value("in", "") + ":" + r->value("name", "")] = *r;
  }
  return out;
}

}  // namespace

common::Result<json> ParseYaml(const std::string& text) {
  try {
    return ToJson(YAML::Load(text));
  } catch (const std::exception& e) {
    return common::InvalidArgument(std::string("YAML: ") + e.what());
  }
}

common::Result<json> LoadYamlFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return common::NotFound("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseYaml(ss.str());
}

std::vector<Operation> Operations(const json& doc) {
  std::vector<Operation> out;
  for (const auto& [path, item] : Member(doc, "paths").items()) {
    for (const char* m : kMethods) {
      if (item.contains(m)) out.push_back({Upper(m), path, item[m]});
    }
  }
  return out;
}

std::vector<Example> Examples(const json& doc) {
  std::vector<Example> out;
  for (const Operation& o : Operations(doc)) {
    const std::string name = o.method + " " + o.path;
    for (const json& p : o.op.value("parameters", json::array())) {
      const json& param = Or(Deref(doc, p));
      if (param.contains("example") && param.contains("schema")) {
        out.push_back(
            {name + " parameter " + param.value("name", ""), param["example"], param["schema"], 0});
      }
    }
    if (o.op.contains("requestBody")) {
      const json& body = Or(Deref(doc, o.op["requestBody"]));
      for (const auto& [type, media] : Member(body, "content").items()) {
        MediaExamples(doc, media, name + " requestBody " + type, 0, &out);
      }
    }
    for (const auto& [status, r] : Member(o.op, "responses").items()) {
      const json& resp = Or(Deref(doc, r));
      const int code = std::atoi(status.c_str());
      for (const auto& [type, media] : Member(resp, "content").items()) {
        MediaExamples(doc, media, name + " responses." + status + " " + type, code, &out);
      }
      for (const auto& [hname, h] : Member(resp, "headers").items()) {
        const json& header = Or(Deref(doc, h));
        if (header.contains("example") && header.contains("schema")) {
          out.push_back({name + " responses." + status + " header " + hname, header["example"],
                         header["schema"], 0});
        }
      }
    }
  }
  const json components = doc.value("components", json::object());
  SchemaExamples(components.value("schemas", json::object()), "components.schemas", &out);
  return out;
}

const json* ResponseSchema(const json& doc, const Operation& op, int status) {
  const json& responses = Member(op.op, "responses");
  const std::string key = std::to_string(status);
  if (!responses.contains(key)) return nullptr;
  const json* media = JsonMedia(doc, responses[key]);
  if (!media || !media->contains("schema")) return nullptr;
  return &(*media)["schema"];
}

int MajorVersion(const json& doc) {
  const std::string v = doc.value("info", json::object()).value("version", "0");
  return std::atoi(v.c_str());
}

std::vector<std::string> CompatibilityBreaks(const json& baseline, const json& current) {
  std::vector<std::string> breaks;
  const json cur_paths = current.value("paths", json::object());
  for (const Operation& b : Operations(baseline)) {
    const std::string name = b.method + " " + b.path;
    std::string lower = b.method;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    if (!cur_paths.contains(b.path) || !cur_paths[b.path].contains(lower)) {
      breaks.push_back(name + ": route removed");
      continue;
    }
    const json& c = cur_paths[b.path][lower];
    const json c_responses = c.value("responses", json::object());
    for (const auto& [status, br] : Member(b.op, "responses").items()) {
      const std::string where = name + " " + status;
      if (!c_responses.contains(status)) {
        if (status[0] == '2') breaks.push_back(where + ": response removed");
        continue;
      }
      const json* bm = JsonMedia(baseline, br);
      const json* cm = JsonMedia(current, c_responses[status]);
      if (bm && !cm) {
        breaks.push_back(where + ": no longer JSON");
      } else if (bm && cm && bm->contains("schema") && cm->contains("schema")) {
        CompareResponse(baseline, current, (*bm)["schema"], (*cm)["schema"], where + " $", 0,
                        &breaks);
      }
    }
    if (b.op.contains("requestBody") && c.contains("requestBody")) {
      const json* bm = JsonMedia(baseline, b.op["requestBody"]);
      const json* cm = JsonMedia(current, c["requestBody"]);
      if (bm && cm && bm->contains("schema") && cm->contains("schema")) {
        CompareRequest(baseline, current, (*bm)["schema"], (*cm)["schema"], name + " request $", 0,
                       &breaks);
      }
    }
    const auto b_params = Params(baseline, b.op);
    for (const auto& [key, p] : Params(current, c)) {
      const auto it = b_params.find(key);
      if (p.value("required", false) &&
          (it == b_params.end() || !it->second.value("required", false))) {
        breaks.push_back(name + " parameter " + key + ": newly required");
      }
      if (it != b_params.end() && it->second.contains("schema") && p.contains("schema")) {
        CompareRequest(baseline, current, it->second["schema"], p["schema"],
                       name + " parameter " + key, 0, &breaks);
      }
    }
  }
  return breaks;
}

}  // namespace embody::testing
