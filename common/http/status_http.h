// Status <-> HTTP, both directions, for every process that speaks HTTP: embody-server and the
// agent's job-local API write errors with it, and the CLI, the agent's server channel and the
// engine's event reporter read them back with it, so a Code survives the trip (IsNotFound-style
// checks work the same on both sides of a call).
//
// The wire form (docs/contracts.md): the HTTP status from HttpStatusFor and the body
//   {"error":{"code":"invalid_argument","message":"...","field":"resources.nodes"}}
// with "field" present only when the Status names one. No httplib here: it is table-tested bare.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace common::http {

// The HTTP status a Status with `code` is answered with.
int HttpStatusFor(Code code);
// The Retry-After (seconds) an answer with `code` carries, or 0 for none. kUnavailable (503)
// says "the same call may succeed in a moment" (the database is away or busy): 1 second.
// A 429 from the rate limiter computes its own.
int RetryAfterSecondsFor(Code code);
// The Code for an HTTP status that came without our error body (a proxy, a load balancer, a
// bare httplib answer): the closest Code, kInternal where there is none.
Code CodeForHttpStatus(int http_status);

nlohmann::json ErrorBody(const Status& status);
// ErrorBody as the text a response carries (invalid UTF-8 in a message is replaced, never thrown).
std::string ErrorBodyText(const Status& status);

// The Status for a response that is not 2xx. Code, message and field come from an error body
// whose code names one this build knows and agrees with the HTTP status (HttpStatusFor); a body
// that does not (not JSON, not ours, an unknown code, a code the status contradicts) keeps its
// message and field when it has them, and the Code comes from the HTTP status. A 2xx status is
// not an error and gives kInternal: callers only decode failures.
Status StatusFromResponse(int http_status, std::string_view body);

}  // namespace common::http
