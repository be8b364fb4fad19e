#include "storage/parquet/thrift_compact_writer.h"

#include <cstring>

namespace storage::parquet {

void CompactWriter::StructEnd() {
  Byte(0);
  last_ids_.pop_back();
}

void CompactWriter::FieldHeader(int16_t id, ThriftType type) {
  const int delta = id - last_ids_.back();
  if (delta > 0 && delta <= 15) {
    Byte(static_cast<uint8_t>(delta << 4 | static_cast<int>(type)));
  } else {
    Byte(static_cast<uint8_t>(type));
    ZigZag(id);
  }
  last_ids_.back() = id;
}

void CompactWriter::Varint(uint64_t v) {
  while (v >= 0x80) {
    Byte(static_cast<uint8_t>(v | 0x80));
    v >>= 7;
  }
  Byte(static_cast<uint8_t>(v));
}

void CompactWriter::ZigZag(int64_t v) {
  Varint((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
}

void CompactWriter::I32(int16_t id, int32_t v) {
  FieldHeader(id, ThriftType::kI32);
  ZigZag(v);
}

void CompactWriter::I64(int16_t id, int64_t v) {
  FieldHeader(id, ThriftType::kI64);
  ZigZag(v);
}

void CompactWriter::Bool(int16_t id, bool v) {
  FieldHeader(id, v ? ThriftType::kTrue : ThriftType::kFalse);
}

void CompactWriter::Double(int16_t id, double v) {
  FieldHeader(id, ThriftType::kDouble);
  char b[8];
  std::memcpy(b, &v, 8);  // little-endian, as the compact protocol sends doubles
  out_.append(b, 8);
}

void CompactWriter::Binary(int16_t id, std::string_view v) {
  FieldHeader(id, ThriftType::kBinary);
  RawBinary(v);
}

void CompactWriter::RawBinary(std::string_view v) {
  Varint(v.size());
  out_.append(v);
}

void CompactWriter::ListBegin(int16_t id, ThriftType element, uint32_t n) {
  FieldHeader(id, ThriftType::kList);
  if (n < 15) {
    Byte(static_cast<uint8_t>(n << 4 | static_cast<int>(element)));
  } else {
    Byte(static_cast<uint8_t>(0xf0 | static_cast<int>(element)));
    Varint(n);
  }
}

}  // namespace storage::parquet
