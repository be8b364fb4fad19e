#include "common/http/status_http.h"

namespace common::http {

using nlohmann::json;

int HttpStatusFor(Code code) {
  switch (code) {
    case Code::kOk: return 200;
    case Code::kInvalidArgument: return 400;
    case Code::kUnimplemented: return 400;
    case Code::kNotFound: return 404;
    case Code::kAlreadyExists: return 409;
    case Code::kFailedPrecondition: return 409;
    case Code::kUnauthenticated: return 401;
    case Code::kPermissionDenied: return 403;
    case Code::kResourceExhausted: return 429;
    case Code::kUnavailable: return 503;
    case Code::kUnprocessable: return 422;
    case Code::kPreconditionFailed: return 412;
    case Code::kInternal: return 500;
  }
  return 500;
}

int RetryAfterSecondsFor(Code code) { return code == Code::kUnavailable ? 1 : 0; }

Code CodeForHttpStatus(int http_status) {
  switch (http_status) {
    case 400: return Code::kInvalidArgument;
    case 401: return Code::kUnauthenticated;
    case 403: return Code::kPermissionDenied;
    case 404: return Code::kNotFound;
    case 409: return Code::kFailedPrecondition;
    case 412: return Code::kPreconditionFailed;
    case 422: return Code::kUnprocessable;
    case 429: return Code::kResourceExhausted;
    case 500: return Code::kInternal;
    case 501: return Code::kUnimplemented;
  }
  // 502, 503, 504 and the rest of 5xx: something between us and the server, or the server
  // itself, cannot answer now; callers retry those.
  if (http_status >= 500 && http_status <= 599) return Code::kUnavailable;
  // 405, 413, 414, 431...: the request as sent was not acceptable.
  if (http_status >= 400 && http_status <= 499) return Code::kInvalidArgument;
  return Code::kInternal;
}

json ErrorBody(const Status& status) {
  json e{{"code", CodeName(status.code())}, {"message", status.message()}};
  if (!status.field().empty()) e["field"] = status.field();
  return {{"error", e}};
}

std::string ErrorBodyText(const Status& status) {
  return ErrorBody(status).dump(-1, ' ', false, json::error_handler_t::replace);
}

Status StatusFromResponse(int http_status, std::string_view body) {
  const Code from_status = CodeForHttpStatus(http_status);
  const std::string fallback =
      "HTTP " + std::to_string(http_status) +
      (body.empty() ? "" : ": " + std::string(body.substr(0, 200)));
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status(from_status, fallback);
  const auto e = j.find("error");
  if (e == j.end() || !e->is_object()) return Status(from_status, fallback);
  auto text = [&](const char* key) {
    const auto v = e->find(key);
    return v != e->end() && v->is_string() ? v->get<std::string>() : std::string();
  };
  std::string message = text("message");
  if (message.empty()) message = "HTTP " + std::to_string(http_status);
  const std::optional<Code> named = CodeFromName(text("code"));
  // The body's code is kept only when the HTTP status is the one the server gives that code:
  // a proxy's 503 in front of a stale error body, or a body naming ok, does not get to choose.
  const bool agrees = named && *named != Code::kOk && HttpStatusFor(*named) == http_status;
  return Status(agrees ? *named : from_status, std::move(message), text("field"));
}

}  // namespace common::http
