// A reader of the Thrift compact protocol, the encoding of Parquet's file metadata and page
// headers. It reads from a byte range it does not own and never reads outside it: every length,
// count and varint is checked against the bytes that remain before anything is allocated, so a
// list can claim no more elements than bytes left, and nesting (structs inside lists inside
// structs) stops at a depth limit. It is not a general Thrift library: there is no writer, no
// schema and no generated code; metadata.cc and metadata_page_header.cc walk the structs they
// know and skip the rest.
//
// Errors say what was wrong and at which byte offset of the range; the caller adds which file
// and which structure it was reading.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace storage::parquet {

// Wire types of the compact protocol (the low nibble of a field header or list header).
enum class ThriftType : uint8_t {
  kStop = 0,
  kTrue = 1,  // a bool field is its header: 1 true, 2 false
  kFalse = 2,
  kI8 = 3,
  kI16 = 4,
  kI32 = 5,
  kI64 = 6,
  kDouble = 7,
  kBinary = 8,
  kList = 9,
  kSet = 10,
  kMap = 11,
  kStruct = 12,
};

const char* ThriftTypeName(ThriftType type);

class CompactReader {
 public:
  static constexpr int kDefaultMaxDepth = 32;

  CompactReader(const uint8_t* data, size_t size, int max_depth = kDefaultMaxDepth)
      : data_(data), size_(size), max_depth_(max_depth) {}

  // Reads one struct: calls `on_field(id, type)` for each field until the stop byte. The callback
  // must consume the field's value (with a Read* call or Skip(type)) and return a Status; the
  // first error ends the struct. Field ids are checked to be positive.
  template <typename OnField>
  common::Status ReadStruct(OnField&& on_field);

  // Values of a field whose wire type is `type`; a different wire type is an error naming both.
  common::Status ReadBool(ThriftType type, bool* out);
  common::Status ReadI8(ThriftType type, int8_t* out);
  common::Status ReadI16(ThriftType type, int16_t* out);
  common::Status ReadI32(ThriftType type, int32_t* out);
  common::Status ReadI64(ThriftType type, int64_t* out);
  common::Status ReadDouble(ThriftType type, double* out);
  common::Status ReadBinary(ThriftType type, std::string* out);

  // A list (or set) header: the element type and count. The count is at most the bytes that
  // remain, because every element takes at least one byte (an empty struct is its stop byte).
  common::Status ReadListHeader(ThriftType type, ThriftType* element_type, uint32_t* count);
  // Reads `count` elements of a list, calling `on_element(element_type)` for each; nested
  // structs and lists count against the depth limit.
  template <typename OnElement>
  common::Status ReadList(ThriftType type, OnElement&& on_element);

  // Skips a value of any type, including maps, sets and nested structs.
  common::Status Skip(ThriftType type);

  // Raw protocol pieces, public for tests and for the list element readers.
  common::Status ReadVarint(uint64_t* out);
  common::Status ReadZigZag(int64_t* out);

  size_t position() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

 private:
  common::Status Error(const std::string& what) const;
  common::Status WrongType(ThriftType got, const char* want) const;
  common::Status EnterNested();
  void LeaveNested() { --depth_; }
  // Reads a field header; `last_id` is the previous field's id (ids are sent as deltas).
  common::Status ReadFieldHeader(int16_t last_id, int16_t* id, ThriftType* type);

  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  int depth_ = 0;
  int max_depth_;
  // Set by ReadListHeader for the elements that follow: a bool inside a list is one byte, not a
  // field header, so ReadBool must know which it is reading.
  int list_bool_depth_ = -1;
};

template <typename OnField>
common::Status CompactReader::ReadStruct(OnField&& on_field) {
  EMBODY_RETURN_IF_ERROR(EnterNested());
  const int saved_list_bool_depth = list_bool_depth_;
  list_bool_depth_ = -1;  // the struct's own bool fields are headers again
  int16_t last_id = 0;
  common::Status status;
  while (true) {
    int16_t id = 0;
    ThriftType type;
    status = ReadFieldHeader(last_id, &id, &type);
    if (!status.ok() || type == ThriftType::kStop) break;
    status = on_field(id, type);
    if (!status.ok()) break;
    last_id = id;
  }
  list_bool_depth_ = saved_list_bool_depth;
  LeaveNested();
  return status;
}

template <typename OnElement>
common::Status CompactReader::ReadList(ThriftType type, OnElement&& on_element) {
  ThriftType element_type;
  uint32_t count = 0;
  EMBODY_RETURN_IF_ERROR(ReadListHeader(type, &element_type, &count));
  EMBODY_RETURN_IF_ERROR(EnterNested());
  const int saved_list_bool_depth = list_bool_depth_;
  list_bool_depth_ = depth_;
  common::Status status;
  for (uint32_t i = 0; i < count && status.ok(); ++i) status = on_element(element_type);
  list_bool_depth_ = saved_list_bool_depth;
  LeaveNested();
  return status;
}

}  // namespace storage::parquet
