// libFuzzer target: the body of POST /v1/tokens (service::ParseNewToken).
//
// Properties: no crash and no sanitizer report; a body that parses gives a 1-128 character
// printable name, a positive tenant id and an expiry after "now" when it has one.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "controlplane/service/tokens_service.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  constexpr int64_t kNow = 1'767'225'600'000;  // 2026-01-01T00:00:00Z
  auto t = controlplane::service::ParseNewToken(body, /*default_tenant=*/7, kNow);
  if (!t.ok()) return 0;
  if (t->name.empty() || t->name.size() > 128 || t->tenant_id <= 0) std::abort();
  for (unsigned char c : t->name) {
    if (c < 0x20 || c == 0x7f) std::abort();
  }
  if (t->expires_ms && *t->expires_ms <= kNow) std::abort();
  return 0;
}
