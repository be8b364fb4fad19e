// The rules every listener applies to a request's body before reading it, as one httplib
// pre-routing handler (it runs after the headers and before httplib reads a body):
// - no Content-Length and no Transfer-Encoding: no body (RFC 9112 §6.3), whatever the method;
//   httplib 0.11.4 would otherwise read until the client closes;
// - Transfer-Encoding (chunked): refused unread, 411 (httplib reads chunked bodies without its
//   length limit; every client of ours sends a length);
// - Content-Encoding other than identity: refused unread, 415 (httplib inflates without a bound
//   on the output: a 1 MiB gzip body becomes 1 GiB before any handler runs);
// - a body over `max_body`: refused unread, 413; over `anonymous_body` without a bearer token:
//   refused unread, 401;
// - "Accept-Encoding: br" answered with gzip (httplib's Brotli is at its slowest quality).
// A refusal asks for the connection to close; the gate (gated_server.h) then discards what the
// client still sends for a moment so that it reads the answer before the close.
//
// Not here: reading bodies (the gate does, within its deadline), authentication.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include <httplib.h>

#include "common/status.h"

namespace common::http {

struct BodyLimits {
  size_t max_body = 8 * 1024 * 1024;
  size_t anonymous_body = 64 * 1024;  // without "Authorization: Bearer …"
};

// Why a body is refused unread, from what its head says: chunked (411), encoded (415), over the
// anonymous bound without a bearer token (401), over `max_body` (413); nullopt: it may be read.
// `length` nullopt: no Content-Length (no body). The gate (gated_server.h) and ApplyEdgePolicy
// both decide by it, so the gate reads exactly the bodies a worker would.
struct BodyRefusal {
  int http_status = 0;
  Status status;
};
std::optional<BodyRefusal> RefuseBody(bool chunked, bool encoded, std::optional<uint64_t> length,
                                      bool bearer, const BodyLimits& limits);

// The pre-routing handler: Handled with the refusal written to `res`, or Unhandled.
httplib::Server::HandlerResponse ApplyEdgePolicy(const httplib::Request& req,
                                                 httplib::Response& res, const BodyLimits& limits);

// Installs ApplyEdgePolicy as `server`'s pre-routing handler, and an error handler that gives
// httplib's own answers (400, 413, 414, 404) the JSON error body.
void InstallEdgePolicy(httplib::Server& server, BodyLimits limits);

}  // namespace common::http
