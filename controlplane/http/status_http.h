// The one mapping from a Status to an HTTP response: status code per docs/contracts.md and the
// error body {"error":{"code","message","field"}}. No httplib here, so it is unit-tested bare.
#pragma once

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace controlplane::http {

int HttpStatusFor(common::Code code);
nlohmann::json ErrorBody(const common::Status& status);

}  // namespace controlplane::http
