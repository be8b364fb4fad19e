// An entry of the audit log as the API shows it, and a page of them (GET /v1/audit); schemas
// AuditEntry and AuditPage of docs/api/openapi.yaml.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace api::v1 {

struct AuditEntry {
  int64_t id = 0;
  int64_t time_ms = 0;
  std::optional<int64_t> token_id;  // nullopt: no valid token (null on the wire)
  std::string actor;                // the token's name, or "anonymous"
  std::string role;
  std::optional<int64_t> tenant_id;  // the caller's tenant; nullopt: none
  std::string tenant;
  std::string method;
  std::string route;  // the route pattern, e.g. /v1/jobs/{id}/cancel
  std::string path;
  std::string target;  // e.g. "job 12"
  int status = 0;      // the HTTP status answered
  std::string outcome;  // "ok" or the error code
  std::string request_id;
  bool operator==(const AuditEntry&) const = default;
};

// Newest first; `next_cursor` (null on the wire when nullopt) asks for the page after this one.
struct AuditPage {
  std::vector<AuditEntry> entries;
  std::optional<std::string> next_cursor;
  bool operator==(const AuditPage&) const = default;
};

nlohmann::json ToJson(const AuditEntry& e);
nlohmann::json ToJson(const AuditPage& p);
// Each refuses a field of the wrong type or a missing required one, naming it.
common::Result<AuditEntry> ParseAuditEntry(const nlohmann::json& j);
common::Result<AuditPage> ParseAuditPage(const nlohmann::json& j);

}  // namespace api::v1
