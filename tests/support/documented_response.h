// A live answer of embody-server held against docs/api/openapi.yaml: the operation that serves
// the concrete path, the status it documents, and the body against the schema of that status.
// The document is read once per process. Test-only; the HTTP suites' fixture runs it on every
// response (controlplane/testing/server_fixture.h).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "tests/support/openapi_document.h"

namespace embody::testing {

// docs/api/openapi.yaml of this source tree, read and parsed on first use and kept for the life
// of the process (thread-safe); the error names the file when it cannot be read or parsed.
const common::Result<nlohmann::json>& ApiDocument();

// The operation of `ops` that answers `method` on `path` (a concrete path, its query string
// ignored, or a template as the document writes it). A "{name}" segment matches any one
// non-empty segment; where several operations match, the one with more literal segments earlier
// wins ("/v1/jobs/batch" over "/v1/jobs/{id}"). A GET of a path outside the API (/v1, /assets,
// /metrics, /healthz, /readyz) is the dashboard's "/", as the document describes. Null: none.
const Operation* MatchOperation(const std::vector<Operation>& ops, const std::string& method,
                                const std::string& path);

// What the document says against a response of `method path` with `status`, `content_type`
// (the Content-Type header, parameters allowed) and `body`: no such operation, no such status,
// a media type the status does not document, a JSON body that does not parse or does not follow
// the status's schema. A body that is not JSON is checked only for its status and media type.
// One line each (the validator's lines for a schema); empty: documented.
std::vector<std::string> ResponseViolations(const nlohmann::json& doc, const std::string& method,
                                            const std::string& path, int status,
                                            const std::string& content_type,
                                            const std::string& body);

// The same for a JSON value already parsed (what a client printed, e.g. the CLI's -o json):
// its schema is that of the status's application/json content.
std::vector<std::string> JsonResponseViolations(const nlohmann::json& doc,
                                                const std::string& method, const std::string& path,
                                                int status, const nlohmann::json& value);

}  // namespace embody::testing
