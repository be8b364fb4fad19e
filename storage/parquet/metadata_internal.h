// What the metadata parsers share (metadata.cc for the file's footer, metadata_page_header.cc for
// page headers): required-field tracking, the range checks of numbers and enums, and error
// context. Not part of the parquet/ interface; use metadata.h.
#pragma once

#include <bitset>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "common/status.h"
#include "storage/parquet/thrift_compact.h"

namespace storage::parquet::metadata_internal {

using common::Status;

// Which field ids of a struct were seen, to check the required ones once the struct ends.
class Seen {
 public:
  void Mark(int16_t id) {
    if (id > 0 && id < 64) bits_.set(static_cast<size_t>(id));
  }
  // Returns an error naming the first required field (by id and name) not seen.
  Status Require(const char* struct_name,
                 std::initializer_list<std::pair<int, const char*>> fields) const {
    for (const auto& [id, name] : fields) {
      if (!bits_.test(static_cast<size_t>(id))) {
        return common::InvalidArgument(std::string(struct_name) + " has no " + name);
      }
    }
    return Status::Ok();
  }

 private:
  std::bitset<64> bits_;
};

inline Status NotNegative(const char* what, int64_t v) {
  if (v < 0) return common::InvalidArgument(std::string(what) + " is negative");
  return Status::Ok();
}

inline Status ReadEnum(CompactReader& r, ThriftType t, int32_t lo, int32_t hi,
                       const char* what, int32_t* out) {
  EMBODY_RETURN_IF_ERROR(r.ReadI32(t, out));
  if (*out < lo || *out > hi) {
    return common::InvalidArgument(std::string(what) + " " + std::to_string(*out) +
                                   " is not defined");
  }
  return Status::Ok();
}

// Adds "where" to a thrift or validation error, keeping its code.
inline Status In(const char* where, Status s) {
  if (s.ok()) return s;
  return Status(s.code(), std::string(where) + ": " + s.message(), s.field());
}

}  // namespace storage::parquet::metadata_internal
