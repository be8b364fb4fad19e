#include "controlplane/http/status_http.h"

namespace controlplane::http {

int HttpStatusFor(common::Code code) {
  using common::Code;
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

nlohmann::json ErrorBody(const common::Status& status) {
  nlohmann::json e{{"code", common::CodeName(status.code())}, {"message", status.message()}};
  if (!status.field().empty()) e["field"] = status.field();
  return {{"error", e}};
}

}  // namespace controlplane::http
