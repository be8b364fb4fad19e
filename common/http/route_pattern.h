// Route patterns as the API documents them ("/v1/jobs/{id}/cancel") and the regex a server
// matches for one. Each route is written once, as its pattern; the pattern is also its name in
// logs, metrics and the audit log, and what docs/api/openapi.yaml is checked against.
#pragma once

#include <string>

namespace common::http {

// `{id}` matches a decimal id, (\d+); any other `{name}` one path segment, ([^/]+); everything
// else matches itself (regex characters escaped). Path parameters are the regex's groups, in
// order. Throws std::invalid_argument for a '{' without its '}': a programming error, found at
// start-up when routes are registered.
std::string PatternRegex(const std::string& pattern);

}  // namespace common::http
