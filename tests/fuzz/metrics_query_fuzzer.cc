// libFuzzer target: the query of GET /v1/jobs/{id}/metrics (service::ParseMetricsRequest). The
// input is split at the first two newlines into names=, since= and max_points=.
//
// Properties: no crash and no sanitizer report; a query that parses has 1..32 distinct valid
// names or none, max_points in 1..5000, and a `since` time read exactly as common::ParseUtcTime
// reads it (one reading of times in the whole API).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <stdexcept>
#include <string>

#include "common/parse_int.h"
#include "common/time_util.h"
#include "controlplane/service/metrics_history.h"

namespace {

std::string Take(std::string& rest) {
  const size_t nl = rest.find('\n');
  std::string head = rest.substr(0, nl);
  rest = nl == std::string::npos ? "" : rest.substr(nl + 1);
  return head;
}

// since= is a step when it is a strict decimal integer (common::ParseInt64).
bool IsInteger(const std::string& s) { return common::ParseInt64(s).ok(); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string rest(reinterpret_cast<const char*>(data), size);
  const std::string names = Take(rest);
  const std::string since = Take(rest);
  const std::string max_points = rest;
  auto r = controlplane::service::ParseMetricsRequest(names, since, max_points);
  if (!r.ok()) return 0;
  namespace svc = controlplane::service;
  if (r->names.size() > svc::kMaxSeriesNames) std::abort();
  if (std::set<std::string>(r->names.begin(), r->names.end()).size() != r->names.size()) {
    std::abort();
  }
  for (const std::string& n : r->names) {
    if (n.empty() || n.size() > svc::kMaxSeriesNameLength) std::abort();
  }
  if (r->query.max_points < 1 || r->query.max_points > svc::kMaxMaxPoints) std::abort();
  if (!since.empty() && !IsInteger(since)) {
    std::optional<int64_t> common_ms = common::ParseUtcTime(since);
    if (!common_ms || *common_ms != r->query.since_ms) {
      std::fprintf(stderr, "since='%s': metrics query reads %lld, common::ParseUtcTime %s\n",
                   since.c_str(), static_cast<long long>(r->query.since_ms),
                   common_ms ? std::to_string(*common_ms).c_str() : "refuses it");
      std::abort();
    }
  }
  return 0;
}
