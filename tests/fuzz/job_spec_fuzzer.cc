// libFuzzer target: JobSpec validation as POST /v1/jobs runs it (raw request bytes in).
//
// Properties: no crash and no sanitizer report on any input; a spec that parses is complete, so
// ToJson(spec) parses again, to a spec that writes the same JSON.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "api/job_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  const api::SpecLimits limits;
  common::Result<api::JobSpec> spec = api::ParseJobSpecText(body, limits);
  if (!spec.ok()) {
    // A refusal always names what is wrong.
    if (spec.status().message().empty()) std::abort();
    return 0;
  }
  const nlohmann::json first = api::ToJson(*spec);
  common::Result<api::JobSpec> again = api::ParseJobSpec(first, limits);
  if (!again.ok()) {
    std::fprintf(stderr, "ToJson output does not parse: %s\n%s\n",
                 again.status().ToString().c_str(), first.dump().c_str());
    std::abort();
  }
  const nlohmann::json second = api::ToJson(*again);
  if (first != second) {
    std::fprintf(stderr, "round trip changed the spec:\n%s\n%s\n", first.dump().c_str(),
                 second.dump().c_str());
    std::abort();
  }
  // The text form too: what the server stores is dump(), what the engine reads is that text.
  common::Result<api::JobSpec> from_text = api::ParseJobSpecText(first.dump(), limits);
  if (!from_text.ok() || api::ToJson(*from_text) != first) {
    std::fprintf(stderr, "dumped spec does not round-trip: %s\n", first.dump().c_str());
    std::abort();
  }
  return 0;
}
