// What the HTTP edge needs to know of a request before any worker sees it, read from the request
// line and headers alone (RFC 9112): the method and target, how long the body is, whether it is
// chunked or encoded, and whether it names a bearer token. The gate (gated_server.h) decides
// from this whether it reads the body itself, hands the request on at once (to be refused
// unread) or answers it on the spot; the edge policy (edge_policy.h) applies the same rules to
// the parsed request.
//
// Not here: reading sockets, routing, authentication (a "Bearer" prefix is all that is looked at).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace common::http {

struct RequestHead {
  std::string method;
  std::string target;  // as sent: path and query, percent-encoded
  // The Content-Length, when the request has one. A request with neither Content-Length nor a
  // Transfer-Encoding has no body (RFC 9112 §6.3), whatever its method.
  std::optional<uint64_t> content_length;
  bool has_transfer_encoding = false;  // any value but "identity"
  bool has_content_encoding = false;   // any value but "identity"
  bool has_bearer = false;             // "Authorization: Bearer …"
  // Why the head cannot be served (several Content-Length values that differ, one that is not a
  // number); empty when it can. Such a request is answered 400 and its connection closed.
  std::string error;
};

// Parses `head`: the request line and headers up to and including the blank line. Never throws;
// a head that is not HTTP at all comes back with `error` set.
RequestHead ParseRequestHead(std::string_view head);

// The path of `target`, its query left off.
std::string_view TargetPath(std::string_view target);
// The value of query parameter `name` in `target` ("" when absent), undecoded.
std::string QueryValue(std::string_view target, std::string_view name);

}  // namespace common::http
