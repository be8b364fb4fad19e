#include "common/status.h"

#include <cerrno>
#include <cstring>

namespace common {

Status ErrnoInternal(const std::string& what) {
  return Internal(what + ": " + std::strerror(errno));
}

const char* CodeName(Code code) {
  switch (code) {
    case Code::kOk: return "ok";
    case Code::kInvalidArgument: return "invalid_argument";
    case Code::kUnimplemented: return "unimplemented";
    case Code::kNotFound: return "not_found";
    case Code::kAlreadyExists: return "already_exists";
    case Code::kFailedPrecondition: return "failed_precondition";
    case Code::kUnauthenticated: return "unauthenticated";
    case Code::kPermissionDenied: return "permission_denied";
    case Code::kResourceExhausted: return "resource_exhausted";
    case Code::kUnavailable: return "unavailable";
    case Code::kUnprocessable: return "unprocessable";
    case Code::kPreconditionFailed: return "precondition_failed";
    case Code::kInternal: return "internal";
  }
  return "internal";
}

std::optional<Code> CodeFromName(const std::string& name) {
  for (int c = static_cast<int>(Code::kOk); c <= static_cast<int>(Code::kInternal); ++c) {
    if (name == CodeName(static_cast<Code>(c))) return static_cast<Code>(c);
  }
  return std::nullopt;
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  std::string s = CodeName(code_);
  s += ": " + message_;
  if (!field_.empty()) s += " (field " + field_ + ")";
  return s;
}

}  // namespace common
