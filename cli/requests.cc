#include "cli/requests.h"

#include <cstdio>

namespace cli {

using nlohmann::json;

std::string QueryValue(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof(buf), "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

std::string JobsPath(const Invocation& inv) {
  std::string path = "/v1/jobs?limit=" + std::to_string(inv.limit);
  if (!inv.state.empty()) path += "&state=" + QueryValue(inv.state);
  return path;
}

json TenantBody(const Invocation& inv) {
  json body = json::object();
  if (!inv.name.empty()) body["name"] = inv.name;
  if (inv.weight) body["weight"] = *inv.weight;
  for (const auto& [key, value] : inv.quota) {
    body["quota"][key] = value ? json(*value) : json(nullptr);
  }
  return body;
}

json TokenBody(const Invocation& inv) {
  json body = {{"role", inv.role}, {"name", inv.name}};
  if (inv.tenant) body["tenant_id"] = *inv.tenant;
  if (!inv.expires.empty()) body["expires_at"] = inv.expires;
  return body;
}

std::string AuditPath(int limit, const std::string& cursor) {
  std::string path = "/v1/audit?limit=" + std::to_string(limit);
  if (!cursor.empty()) path += "&cursor=" + QueryValue(cursor);
  return path;
}

}  // namespace cli
