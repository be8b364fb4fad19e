#include "tests/support/documented_response.h"

#include <cctype>
#include <regex>

#include "tests/support/json_schema.h"

namespace embody::testing {

using nlohmann::json;

namespace {

std::vector<std::string> Segments(const std::string& path) {
  std::vector<std::string> out;
  size_t start = 1;
  while (start <= path.size()) {
    const size_t slash = path.find('/', start);
    const size_t end = slash == std::string::npos ? path.size() : slash;
    out.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

bool IsTemplate(const std::string& segment) {
  return segment.size() > 2 && segment.front() == '{' && segment.back() == '}';
}

// Whether `concrete` matches `tmpl`; `literal` gets one flag per segment, true where `tmpl` is
// literal: compared lexicographically, the larger is the more specific match.
bool Match(const std::vector<std::string>& tmpl, const std::vector<std::string>& concrete,
           std::vector<bool>* literal) {
  if (tmpl.size() != concrete.size()) return false;
  literal->clear();
  for (size_t i = 0; i < tmpl.size(); ++i) {
    if (IsTemplate(tmpl[i])) {
      if (concrete[i].empty()) return false;
      literal->push_back(false);
    } else {
      if (tmpl[i] != concrete[i]) return false;
      literal->push_back(true);
    }
  }
  return true;
}

// The media type without parameters, lower case: "application/json; charset=utf-8" ->
// "application/json".
std::string MediaType(const std::string& content_type) {
  std::string s = content_type.substr(0, content_type.find(';'));
  while (!s.empty() && s.back() == ' ') s.pop_back();
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Name(const std::string& method, const std::string& path, int status) {
  return method + " " + path + " " + std::to_string(status);
}

// The documented response object of `method path` for `status` ($ref followed), or a line
// saying why there is none.
const json* DocumentedResponse(const json& doc, const std::string& method, const std::string& path,
                               int status, std::vector<std::string>* out) {
  // The process's document is split into operations once; any other is split per call.
  static const std::vector<Operation> api_ops =
      ApiDocument().ok() ? Operations(*ApiDocument()) : std::vector<Operation>{};
  const bool is_api = ApiDocument().ok() && &doc == &*ApiDocument();
  const std::vector<Operation> other_ops = is_api ? std::vector<Operation>{} : Operations(doc);
  const Operation* op = MatchOperation(is_api ? api_ops : other_ops, method, path);
  if (!op) {
    out->push_back(method + " " + path + ": no operation of the document serves it");
    return nullptr;
  }
  // From `doc` itself: `op` may be a copy that goes when this returns.
  std::string lower = op->method;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const json& responses =
      Member(Member(Member(Member(doc, "paths"), op->path), lower), "responses");
  const std::string key = std::to_string(status);
  const json* response = responses.contains(key) ? Deref(doc, responses[key]) : nullptr;
  if (!response) {
    out->push_back(Name(method, op->path, status) + ": status not documented");
    return nullptr;
  }
  return response;
}

}  // namespace

const common::Result<json>& ApiDocument() {
  static const common::Result<json> doc =
      LoadYamlFile(std::string(EMBODY_SOURCE_DIR) + "/docs/api/openapi.yaml");
  return doc;
}

const Operation* MatchOperation(const std::vector<Operation>& ops, const std::string& method,
                                const std::string& path) {
  const std::string bare = path.substr(0, path.find('?'));
  const std::vector<std::string> concrete = Segments(bare);
  const Operation* best = nullptr;
  std::vector<bool> best_literal, literal;
  for (const Operation& op : ops) {
    if (op.method != method || !Match(Segments(op.path), concrete, &literal)) continue;
    if (!best || literal > best_literal) {
      best = &op;
      best_literal = literal;
    }
  }
  // The dashboard's route answers every other GET outside the API (controlplane/http/
  // web_routes.cc), documented once as "/".
  static const std::regex kOutsideApi(R"(/(?!v1(?:/|$)|metrics$|healthz$|readyz$).*)");
  if (!best && method == "GET" && std::regex_match(bare, kOutsideApi)) {
    for (const Operation& op : ops) {
      if (op.method == "GET" && op.path == "/") return &op;
    }
  }
  return best;
}

std::vector<std::string> ResponseViolations(const json& doc, const std::string& method,
                                            const std::string& path, int status,
                                            const std::string& content_type,
                                            const std::string& body) {
  std::vector<std::string> out;
  const json* response = DocumentedResponse(doc, method, path, status, &out);
  if (!response) return out;
  const json& content = Member(*response, "content");
  const std::string type = MediaType(content_type);
  if (content.empty()) {
    // A status documented without a body (204, a redirect): nothing more to hold it to.
    if (!body.empty()) {
      out.push_back(Name(method, path, status) + ": a " + (type.empty() ? "body" : type) +
                    " body where the document gives none");
    }
    return out;
  }
  if (!content.contains(type)) {
    std::string documented;
    for (const auto& [t, _] : content.items()) documented += (documented.empty() ? "" : ", ") + t;
    out.push_back(Name(method, path, status) + ": media type \"" + type +
                  "\" not documented (documented: " + documented + ")");
    return out;
  }
  if (type != "application/json") return out;
  const json value = json::parse(body, nullptr, false);
  if (value.is_discarded()) {
    out.push_back(Name(method, path, status) + ": the body is not JSON");
    return out;
  }
  const json& media = content[type];
  if (!media.contains("schema")) return out;
  for (const std::string& e : ValidateJson(value, media["schema"], doc)) out.push_back(e);
  return out;
}

std::vector<std::string> JsonResponseViolations(const json& doc, const std::string& method,
                                                const std::string& path, int status,
                                                const json& value) {
  std::vector<std::string> out;
  const json* response = DocumentedResponse(doc, method, path, status, &out);
  if (!response) return out;
  const json& content = Member(*response, "content");
  if (!content.contains("application/json") || !content["application/json"].contains("schema")) {
    out.push_back(Name(method, path, status) + ": no JSON schema documented");
    return out;
  }
  return ValidateJson(value, content["application/json"]["schema"], doc);
}

}  // namespace embody::testing
