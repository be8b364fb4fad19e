// What the parts of the job spec parser share (api/job_spec.cc and its job_spec_*.cc siblings):
// the strict JSON object reader every section is read with, and the section parsers that
// ParseJobSpec calls from another file. Not part of the api/ interface; include job_spec.h.
#pragma once

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/job_spec.h"
#include "common/status.h"

namespace api::job_spec_internal {

using common::Code;
using common::InvalidArgument;
using common::Status;
using nlohmann::json;

inline std::string Join(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + "." + key;
}

// Walks one JSON object, checking that every key is known. Each Get* reads one optional field
// with a strict type check (no float for an int, no bool for a number).
class ObjectReader {
 public:
  ObjectReader(const json& j, std::string path) : j_(j), path_(std::move(path)) {}

  Status CheckObject() const {
    if (!j_.is_object()) return InvalidArgument("must be an object", path_.empty() ? "" : path_);
    return Status::Ok();
  }

  // Rejects keys outside `known`; keys in `unbuilt` get a clear "not built yet" answer.
  Status CheckKeys(const std::set<std::string>& known,
                   const std::map<std::string, std::string>& unbuilt = {}) const {
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      auto u = unbuilt.find(it.key());
      if (u != unbuilt.end()) {
        return Status(Code::kUnimplemented, u->second, Join(path_, it.key()));
      }
      if (!known.count(it.key())) {
        return InvalidArgument("unknown field", Join(path_, it.key()));
      }
    }
    return Status::Ok();
  }

  bool Has(const std::string& key) const { return j_.contains(key); }
  const json& At(const std::string& key) const { return j_.at(key); }
  std::string PathOf(const std::string& key) const { return Join(path_, key); }

  Status GetInt(const std::string& key, int64_t lo, int64_t hi, int* out) const {
    if (!Has(key)) return Status::Ok();
    const json& v = j_.at(key);
    if (!v.is_number_integer()) return InvalidArgument("must be an integer", PathOf(key));
    int64_t x = v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX
                    ? INT64_MAX
                    : v.get<int64_t>();
    if (x < lo || x > hi) {
      return InvalidArgument("must be between " + std::to_string(lo) + " and " +
                                 std::to_string(hi) + ", got " + v.dump(),
                             PathOf(key));
    }
    *out = static_cast<int>(x);
    return Status::Ok();
  }

  Status GetInt64(const std::string& key, int64_t lo, int64_t hi, int64_t* out) const {
    if (!Has(key)) return Status::Ok();
    const json& v = j_.at(key);
    if (!v.is_number_integer()) return InvalidArgument("must be an integer", PathOf(key));
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)) {
      return InvalidArgument("must be between " + std::to_string(lo) + " and " +
                                 std::to_string(hi) + ", got " + v.dump(),
                             PathOf(key));
    }
    int64_t x = v.get<int64_t>();
    if (x < lo || x > hi) {
      return InvalidArgument("must be between " + std::to_string(lo) + " and " +
                                 std::to_string(hi) + ", got " + v.dump(),
                             PathOf(key));
    }
    *out = x;
    return Status::Ok();
  }

  Status GetBool(const std::string& key, bool* out) const {
    if (!Has(key)) return Status::Ok();
    const json& v = j_.at(key);
    if (!v.is_boolean()) return InvalidArgument("must be true or false", PathOf(key));
    *out = v.get<bool>();
    return Status::Ok();
  }

  Status GetUint64(const std::string& key, uint64_t* out) const {
    if (!Has(key)) return Status::Ok();
    const json& v = j_.at(key);
    if (!v.is_number_integer() || (v.is_number_integer() && !v.is_number_unsigned() &&
                                    v.get<int64_t>() < 0)) {
      return InvalidArgument("must be a non-negative integer", PathOf(key));
    }
    *out = v.get<uint64_t>();
    return Status::Ok();
  }

  Status GetDouble(const std::string& key, double lo, double hi, double* out) const {
    if (!Has(key)) return Status::Ok();
    const json& v = j_.at(key);
    if (!v.is_number()) return InvalidArgument("must be a number", PathOf(key));
    double x = v.get<double>();
    if (!std::isfinite(x) || x < lo || x > hi) {
      return InvalidArgument("must be between " + json(lo).dump() + " and " + json(hi).dump(),
                             PathOf(key));
    }
    *out = x;
    return Status::Ok();
  }

  Status GetString(const std::string& key, const std::set<std::string>& allowed,
                   std::string* out) const {
    if (!Has(key)) return Status::Ok();
    const json& v = j_.at(key);
    if (!v.is_string()) return InvalidArgument("must be a string", PathOf(key));
    std::string s = v.get<std::string>();
    if (!allowed.empty() && !allowed.count(s)) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      return InvalidArgument("must be one of: " + list + "; got \"" + s + "\"", PathOf(key));
    }
    *out = s;
    return Status::Ok();
  }

 private:
  const json& j_;
  std::string path_;
};

// engine (kinds train and rl): every block of it, checked against the others (job_spec_engine.cc).
Status ParseEngine(const json& j, const SpecLimits& limits, EngineOptions* e);
// engine.rl (job_spec_rl.cc).
Status ParseRl(const json& j, RlOptions* r);
// The sections of the other kinds (job_spec_kinds.cc).
Status ParseImport(const json& j, JobSpec* spec);
Status ParseEval(const json& j, EvalOptions* ev);
Status ParseCommandDatasets(const ObjectReader& o, std::vector<std::string>* out);
Status ParseEnvironment(const ObjectReader& o, std::string* python_env, std::string* image);

}  // namespace api::job_spec_internal
