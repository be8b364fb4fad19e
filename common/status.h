// Status and Result<T>: how every fallible call in Embody reports failure.
//
// A Status carries one code from a small fixed set, a human-readable message and, for bad
// input, the dotted path of the offending field ("resources.nodes"). Exceptions thrown by
// libraries are caught at the edge of each component and turned into a Status.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace common {

enum class Code {
  kOk,
  kInvalidArgument,
  kUnimplemented,
  kNotFound,
  kAlreadyExists,
  kFailedPrecondition,
  kUnauthenticated,
  kPermissionDenied,
  kResourceExhausted,
  kUnavailable,
  // A valid request the server can never satisfy as asked (a job larger than the cluster).
  kUnprocessable,
  // A conditional write whose precondition (If-Match version) no longer holds.
  kPreconditionFailed,
  kInternal,
};

// Stable lower-case name of a code, used in JSON error bodies ("invalid_argument").
const char* CodeName(Code code);
// The inverse of CodeName, for clients decoding an error body; nullopt for a name it never gives.
std::optional<Code> CodeFromName(const std::string& name);

class Status {
 public:
  Status() = default;
  Status(Code code, std::string message, std::string field = "")
      : code_(code), message_(std::move(message)), field_(std::move(field)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  const std::string& field() const { return field_; }
  std::string ToString() const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
  std::string field_;
};

inline Status InvalidArgument(std::string msg, std::string field = "") {
  return Status(Code::kInvalidArgument, std::move(msg), std::move(field));
}
inline Status NotFound(std::string msg) { return Status(Code::kNotFound, std::move(msg)); }
inline Status Internal(std::string msg) { return Status(Code::kInternal, std::move(msg)); }
// Internal, "what: " and strerror(errno): a system call that failed.
Status ErrnoInternal(const std::string& what);
inline Status Unavailable(std::string msg) { return Status(Code::kUnavailable, std::move(msg)); }
inline Status FailedPrecondition(std::string msg) {
  return Status(Code::kFailedPrecondition, std::move(msg));
}

// Result<T> holds either a value or a non-OK Status.
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}           // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}     // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace common

#define EMBODY_RETURN_IF_ERROR(expr)          \
  do {                                        \
    ::common::Status _st = (expr);            \
    if (!_st.ok()) return _st;                \
  } while (0)

// Evaluates a Result-returning expression; returns its Status on failure, else binds the value.
#define EMBODY_ASSIGN_OR_RETURN(lhs, expr)          \
  auto lhs##_result = (expr);                       \
  if (!lhs##_result.ok()) return lhs##_result.status(); \
  auto lhs = std::move(lhs##_result.value())
