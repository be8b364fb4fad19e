// Reading the fields of one JSON object for the v1 views' parsers: each read names its dotted
// path, and the first wrong field is kept as an invalid_argument naming it ("tenants[2].quota.slots
// must be an integer or null"), so a client that meets a server it does not understand says
// which field, and the parsers stay one line per field.
//
// Not a validator of the API's rules (ranges, enums): that is the server's, on requests. What is
// checked here is the wire type of each field and, for integers, that they fit the C++ type.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace api::v1 {

// Writing a view: an optional value as itself or null, and a Timestamp or null.
template <typename T>
nlohmann::json OrNull(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}
nlohmann::json TimeOrNull(const std::optional<int64_t>& ms);

class FieldReader {
 public:
  // `j` must outlive the reader. `path`: where `j` sits in the whole document ("" at the top).
  FieldReader(const nlohmann::json& j, std::string path);

  // Required fields: absent or of another type records an error and returns a zero value.
  int64_t Int(const char* key);
  int Int32(const char* key);
  double Number(const char* key);
  bool Bool(const char* key);
  std::string String(const char* key);
  // A Timestamp (common::FormatTimeMillis's layout), as milliseconds since the epoch.
  int64_t Time(const char* key);

  // Required, and null allowed (null: nullopt).
  std::optional<int64_t> NullableInt(const char* key);
  std::optional<int> NullableInt32(const char* key);
  std::optional<std::string> NullableString(const char* key);
  std::optional<int64_t> NullableTime(const char* key);
  std::optional<double> NullableNumber(const char* key);
  // An object or null (null: nullptr, as is a missing or mistyped one, whose error is recorded).
  const nlohmann::json* NullableObject(const char* key);

  // May be absent: nullopt when it is (null is a wrong type).
  std::optional<int64_t> OptionalInt(const char* key);
  std::optional<std::string> OptionalString(const char* key);
  std::optional<bool> OptionalBool(const char* key);

  // Whether `key` is present (null included): for the parts of a view that come together.
  bool Has(const char* key) const { return j_.is_object() && j_.contains(key); }

  // A required member that is an object or an array, or nullptr (error recorded).
  const nlohmann::json* Object(const char* key);
  const nlohmann::json* Array(const char* key);
  // The dotted path of `key` under this object, for nested readers.
  std::string PathOf(const char* key) const;
  std::string PathOf(const char* key, size_t index) const;

  // Records `s` unless an error is already kept (nested readers report into their parent).
  void Note(const common::Status& s);
  const common::Status& status() const { return status_; }

 private:
  const nlohmann::json* Find(const char* key, bool required);
  void Wrong(const char* key, const char* what);

  const nlohmann::json& j_;
  std::string path_;
  common::Status status_;
};

// The array `key` of `r`, each element read by `read(FieldReader&)` with its own path
// ("tenants[3]"); errors go to `r`.
template <typename T, typename Read>
std::vector<T> ReadArray(FieldReader& r, const char* key, Read read) {
  std::vector<T> out;
  const nlohmann::json* a = r.Array(key);
  if (a == nullptr) return out;
  out.reserve(a->size());
  for (size_t i = 0; i < a->size(); ++i) {
    FieldReader item((*a)[i], r.PathOf(key, i));
    out.push_back(read(item));
    r.Note(item.status());
  }
  return out;
}

// The object `key` of `r` read by `read(FieldReader&)`, its errors reported into `r`.
template <typename T, typename Read>
T ReadNested(FieldReader& r, const char* key, Read read) {
  const nlohmann::json* o = r.Object(key);
  if (o == nullptr) return T{};
  FieldReader nested(*o, r.PathOf(key));
  T value = read(nested);
  r.Note(nested.status());
  return value;
}

// The value `read` makes of a whole document, or the first field it found wrong.
template <typename T, typename Read>
common::Result<T> ReadDocument(const nlohmann::json& j, Read read) {
  FieldReader r(j, "");
  T value = read(r);
  if (!r.status().ok()) return r.status();
  return value;
}

// The array `key` of `r` whose elements are strings (integers that fit int64_t); a wrong
// element is noted in `r` by its path ("reasons[2]").
std::vector<std::string> ReadStrings(FieldReader& r, const char* key);
std::vector<int64_t> ReadInts(FieldReader& r, const char* key);

// invalid_argument unless `j` is an object; `path` names it ("" : "response").
common::Status RequireObject(const nlohmann::json& j, const std::string& path);

}  // namespace api::v1
