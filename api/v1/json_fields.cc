#include "api/v1/json_fields.h"

#include <limits>

#include "common/time_util.h"

namespace api::v1 {

using nlohmann::json;

namespace {

// An integer of the wire that fits T; nullopt for anything else (a float, an unsigned past T).
template <typename T>
std::optional<T> IntOf(const json& v) {
  if (!v.is_number_integer()) return std::nullopt;
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
      return std::nullopt;
    }
    return static_cast<T>(v.get<uint64_t>());
  }
  const int64_t x = v.get<int64_t>();
  if (x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max()) return std::nullopt;
  return static_cast<T>(x);
}

}  // namespace

FieldReader::FieldReader(const json& j, std::string path) : j_(j), path_(std::move(path)) {
  Note(RequireObject(j, path_));
}

std::string FieldReader::PathOf(const char* key) const {
  return path_.empty() ? std::string(key) : path_ + "." + key;
}

std::string FieldReader::PathOf(const char* key, size_t index) const {
  return PathOf(key) + "[" + std::to_string(index) + "]";
}

void FieldReader::Note(const common::Status& s) {
  if (status_.ok() && !s.ok()) status_ = s;
}

void FieldReader::Wrong(const char* key, const char* what) {
  Note(common::InvalidArgument(std::string("must be ") + what, PathOf(key)));
}

const json* FieldReader::Find(const char* key, bool required) {
  if (!j_.is_object()) return nullptr;
  auto it = j_.find(key);
  if (it == j_.end()) {
    if (required) Note(common::InvalidArgument("is required", PathOf(key)));
    return nullptr;
  }
  return &*it;
}

int64_t FieldReader::Int(const char* key) {
  const json* v = Find(key, true);
  if (v == nullptr) return 0;
  auto x = IntOf<int64_t>(*v);
  if (!x) Wrong(key, "a 64-bit integer");
  return x.value_or(0);
}

int FieldReader::Int32(const char* key) {
  const json* v = Find(key, true);
  if (v == nullptr) return 0;
  auto x = IntOf<int>(*v);
  if (!x) Wrong(key, "a 32-bit integer");
  return x.value_or(0);
}

double FieldReader::Number(const char* key) {
  const json* v = Find(key, true);
  if (v == nullptr) return 0;
  if (!v->is_number()) {
    Wrong(key, "a number");
    return 0;
  }
  return v->get<double>();
}

bool FieldReader::Bool(const char* key) {
  const json* v = Find(key, true);
  if (v == nullptr) return false;
  if (!v->is_boolean()) {
    Wrong(key, "true or false");
    return false;
  }
  return v->get<bool>();
}

std::string FieldReader::String(const char* key) {
  const json* v = Find(key, true);
  if (v == nullptr) return "";
  if (!v->is_string()) {
    Wrong(key, "a string");
    return "";
  }
  return v->get<std::string>();
}

int64_t FieldReader::Time(const char* key) {
  const json* v = Find(key, true);
  if (v == nullptr) return 0;
  auto ms = v->is_string() ? common::ParseUtcTime(v->get<std::string>()) : std::nullopt;
  if (!ms) Wrong(key, "an RFC 3339 time in UTC");
  return ms.value_or(0);
}

std::optional<int64_t> FieldReader::NullableInt(const char* key) {
  const json* v = Find(key, true);
  if (v == nullptr || v->is_null()) return std::nullopt;
  auto x = IntOf<int64_t>(*v);
  if (!x) Wrong(key, "a 64-bit integer or null");
  return x;
}

std::optional<int> FieldReader::NullableInt32(const char* key) {
  const json* v = Find(key, true);
  if (v == nullptr || v->is_null()) return std::nullopt;
  auto x = IntOf<int>(*v);
  if (!x) Wrong(key, "a 32-bit integer or null");
  return x;
}

std::optional<std::string> FieldReader::NullableString(const char* key) {
  const json* v = Find(key, true);
  if (v == nullptr || v->is_null()) return std::nullopt;
  if (!v->is_string()) {
    Wrong(key, "a string or null");
    return std::nullopt;
  }
  return v->get<std::string>();
}

std::optional<int64_t> FieldReader::NullableTime(const char* key) {
  const json* v = Find(key, true);
  if (v == nullptr || v->is_null()) return std::nullopt;
  auto ms = v->is_string() ? common::ParseUtcTime(v->get<std::string>()) : std::nullopt;
  if (!ms) Wrong(key, "an RFC 3339 time in UTC or null");
  return ms;
}

std::optional<double> FieldReader::NullableNumber(const char* key) {
  const json* v = Find(key, true);
  if (v == nullptr || v->is_null()) return std::nullopt;
  if (!v->is_number()) {
    Wrong(key, "a number or null");
    return std::nullopt;
  }
  return v->get<double>();
}

const json* FieldReader::NullableObject(const char* key) {
  const json* v = Find(key, true);
  if (v == nullptr || v->is_null()) return nullptr;
  if (!v->is_object()) {
    Wrong(key, "an object or null");
    return nullptr;
  }
  return v;
}

std::optional<int64_t> FieldReader::OptionalInt(const char* key) {
  const json* v = Find(key, false);
  if (v == nullptr) return std::nullopt;
  auto x = IntOf<int64_t>(*v);
  if (!x) Wrong(key, "a 64-bit integer");
  return x;
}

std::optional<std::string> FieldReader::OptionalString(const char* key) {
  const json* v = Find(key, false);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) {
    Wrong(key, "a string");
    return std::nullopt;
  }
  return v->get<std::string>();
}

std::optional<bool> FieldReader::OptionalBool(const char* key) {
  const json* v = Find(key, false);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) {
    Wrong(key, "true or false");
    return std::nullopt;
  }
  return v->get<bool>();
}

const json* FieldReader::Object(const char* key) {
  const json* v = Find(key, true);
  if (v == nullptr) return nullptr;
  if (!v->is_object()) {
    Wrong(key, "an object");
    return nullptr;
  }
  return v;
}

const json* FieldReader::Array(const char* key) {
  const json* v = Find(key, true);
  if (v == nullptr) return nullptr;
  if (!v->is_array()) {
    Wrong(key, "an array");
    return nullptr;
  }
  return v;
}

common::Status RequireObject(const json& j, const std::string& path) {
  if (j.is_object()) return common::Status::Ok();
  return common::InvalidArgument("must be an object", path.empty() ? "response" : path);
}

std::vector<std::string> ReadStrings(FieldReader& r, const char* key) {
  std::vector<std::string> out;
  const json* a = r.Array(key);
  if (a == nullptr) return out;
  for (size_t i = 0; i < a->size(); ++i) {
    if (!(*a)[i].is_string()) {
      r.Note(common::InvalidArgument("must be a string", r.PathOf(key, i)));
      return out;
    }
    out.push_back((*a)[i].get<std::string>());
  }
  return out;
}

std::vector<int64_t> ReadInts(FieldReader& r, const char* key) {
  std::vector<int64_t> out;
  const json* a = r.Array(key);
  if (a == nullptr) return out;
  for (size_t i = 0; i < a->size(); ++i) {
    auto x = IntOf<int64_t>((*a)[i]);
    if (!x) {
      r.Note(common::InvalidArgument("must be a 64-bit integer", r.PathOf(key, i)));
      return out;
    }
    out.push_back(*x);
  }
  return out;
}

nlohmann::json TimeOrNull(const std::optional<int64_t>& ms) {
  return ms ? nlohmann::json(common::FormatTimeMillis(*ms)) : nlohmann::json(nullptr);
}

}  // namespace api::v1
