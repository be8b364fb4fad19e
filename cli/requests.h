// Request paths and bodies built from an invocation's flags. The CLI checks only the shape of
// what it sends; the server validates the values and its message names the field.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "cli/command_line.h"

namespace cli {

// Percent-encodes a query parameter value (RFC 3986 unreserved characters stay as they are).
std::string QueryValue(const std::string& s);

// GET /v1/jobs with --state and --limit.
std::string JobsPath(const Invocation& inv);
// The body of POST /v1/tenants (with `NAME`) or PATCH /v1/tenants/{id} (only the flags given):
// name, weight, quota fields as integers, or null for "none".
nlohmann::json TenantBody(const Invocation& inv);
// The body of POST /v1/tokens.
nlohmann::json TokenBody(const Invocation& inv);
// One page of GET /v1/audit.
std::string AuditPath(int limit, const std::string& cursor);

}  // namespace cli
