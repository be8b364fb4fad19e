// Request ids: the token that ties one HTTP call together across the logs of the processes it
// crosses (CLI or agent -> server, engine -> agent). Shared by embody-server's router and the
// agent's access log, so both accept exactly the same ids from a caller.
//
// An incoming X-Request-Id is honoured when it is safe to copy into a log line and a response
// header: 1-128 characters of [A-Za-z0-9._:-]. Anything else (empty, too long, spaces, quotes,
// control characters) is replaced by a fresh id of 16 hex characters.
#pragma once

#include <string>

namespace common {

inline constexpr const char* kRequestIdHeader = "X-Request-Id";
inline constexpr size_t kMaxRequestIdLength = 128;

bool IsSafeRequestId(const std::string& id);
// `incoming` when it is safe, else a new random id.
std::string RequestIdFor(const std::string& incoming);

}  // namespace common
