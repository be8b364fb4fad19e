// libFuzzer target: the body of POST /v1/tenants and PATCH /v1/tenants/{id}
// (service::ParseTenantFields), create and patch forms both.
//
// Properties: no crash and no sanitizer report; fields that parse are in range (a weight that is
// finite and in (0, 1e6], quotas in [0, 1e9]); a tenant's JSON form parses back to the same fields.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "controlplane/service/tenants_service.h"

namespace {

using controlplane::service::TenantRecord;

void CheckQuota(const std::optional<int>& q) {
  if (q && (*q < 0 || *q > 1'000'000'000)) std::abort();
}

void CheckParsed(const TenantRecord& t) {
  if (!std::isfinite(t.weight) || t.weight <= 0 || t.weight > 1e6) std::abort();
  CheckQuota(t.quota.slots);
  CheckQuota(t.quota.running_jobs);
  CheckQuota(t.quota.pending_jobs);
  CheckQuota(t.quota.nodes_per_job);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr,
                                                 /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return 0;  // the service refuses these before parsing
  for (bool require_name : {true, false}) {
    TenantRecord t;
    t.name = "existing";
    if (!controlplane::service::ParseTenantFields(j, require_name, &t).ok()) continue;
    CheckParsed(t);
    if (require_name && t.name.empty()) std::abort();
    // What GET answers (name, weight, quota) is accepted as a PATCH body and changes nothing.
    nlohmann::json out = api::v1::ToJson(controlplane::service::TenantView(t, {}));
    nlohmann::json patch = {
        {"name", out["name"]}, {"weight", out["weight"]}, {"quota", out["quota"]}};
    TenantRecord back;
    common::Status st = controlplane::service::ParseTenantFields(patch, true, &back);
    if (!st.ok() || back.name != t.name || back.weight != t.weight ||
        back.quota.slots != t.quota.slots || back.quota.running_jobs != t.quota.running_jobs ||
        back.quota.pending_jobs != t.quota.pending_jobs ||
        back.quota.nodes_per_job != t.quota.nodes_per_job) {
      std::fprintf(stderr, "tenant fields do not round-trip: %s -> %s (%s)\n", j.dump().c_str(),
                   patch.dump().c_str(), st.ToString().c_str());
      std::abort();
    }
  }
  return 0;
}
