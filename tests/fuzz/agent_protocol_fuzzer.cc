// libFuzzer target: the agent protocol's request parsers, as the server runs them on
// POST /v1/agents/register and POST /v1/agents/{id}/heartbeat bodies.
//
// Properties: no crash and no sanitizer report (an agent's body is hostile input: a float where
// an int is expected must be refused, not converted with undefined behaviour); a request that
// parses writes JSON (ToJson) that parses again to the same JSON.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "api/agent_protocol.h"

namespace {

template <typename T, typename ParseFn>
void CheckRoundTrip(const nlohmann::json& j, ParseFn parse, const char* what) {
  common::Result<T> r = parse(j);
  if (!r.ok()) return;
  const nlohmann::json first = api::ToJson(*r);
  common::Result<T> again = parse(first);
  if (!again.ok()) {
    std::fprintf(stderr, "%s: ToJson output does not parse: %s\n%s\n", what,
                 again.status().ToString().c_str(), first.dump().c_str());
    std::abort();
  }
  if (api::ToJson(*again) != first) {
    std::fprintf(stderr, "%s: round trip changed the request: %s\n", what, first.dump().c_str());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr,
                                                 /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  CheckRoundTrip<api::RegisterRequest>(
      j, [](const nlohmann::json& x) { return api::ParseRegisterRequest(x); }, "register");
  CheckRoundTrip<api::HeartbeatRequest>(
      j, [](const nlohmann::json& x) { return api::ParseHeartbeatRequest(x); }, "heartbeat");
  return 0;
}
