// The writer side of the Thrift compact protocol (thrift_compact.h reads it): field headers as
// id deltas, zigzag varints, binaries with their length, list headers. It appends to a string
// and checks nothing: the caller states the structs in field-id order and closes what it opens.
// metadata_writer.h uses it for file metadata and page headers; tests use it to state bytes that
// no well-behaved writer would produce.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "storage/parquet/thrift_compact.h"

namespace storage::parquet {

class CompactWriter {
 public:
  void StructBegin() { last_ids_.push_back(0); }
  void StructEnd();  // writes the stop byte
  void FieldHeader(int16_t id, ThriftType type);
  void I32(int16_t id, int32_t v);
  void I64(int16_t id, int64_t v);
  void Bool(int16_t id, bool v);
  void Double(int16_t id, double v);
  void Binary(int16_t id, std::string_view v);
  // A list field header; the caller writes `n` elements after it (structs with StructBegin).
  void ListBegin(int16_t id, ThriftType element, uint32_t n);
  void Varint(uint64_t v);
  void ZigZag(int64_t v);
  void RawBinary(std::string_view v);
  void Byte(uint8_t b) { out_.push_back(static_cast<char>(b)); }

  const std::string& bytes() const { return out_; }

 private:
  std::string out_;
  std::vector<int16_t> last_ids_;
};

}  // namespace storage::parquet
