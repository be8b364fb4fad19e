#include "storage/parquet/thrift_compact.h"

#include <cstring>

namespace storage::parquet {

const char* ThriftTypeName(ThriftType type) {
  switch (type) {
    case ThriftType::kStop:
      return "stop";
    case ThriftType::kTrue:
    case ThriftType::kFalse:
      return "bool";
    case ThriftType::kI8:
      return "i8";
    case ThriftType::kI16:
      return "i16";
    case ThriftType::kI32:
      return "i32";
    case ThriftType::kI64:
      return "i64";
    case ThriftType::kDouble:
      return "double";
    case ThriftType::kBinary:
      return "binary";
    case ThriftType::kList:
      return "list";
    case ThriftType::kSet:
      return "set";
    case ThriftType::kMap:
      return "map";
    case ThriftType::kStruct:
      return "struct";
  }
  return "unknown";
}

common::Status CompactReader::Error(const std::string& what) const {
  return common::InvalidArgument("thrift: " + what + " at byte " + std::to_string(pos_) + " of " +
                                 std::to_string(size_));
}

common::Status CompactReader::WrongType(ThriftType got, const char* want) const {
  return Error(std::string("a field of wire type ") + ThriftTypeName(got) + " where " + want +
               " was expected");
}

common::Status CompactReader::EnterNested() {
  if (depth_ >= max_depth_) {
    return Error("nesting deeper than " + std::to_string(max_depth_) + " levels");
  }
  ++depth_;
  return common::Status::Ok();
}

common::Status CompactReader::ReadVarint(uint64_t* out) {
  uint64_t value = 0;
  // At most 10 bytes: 9 × 7 bits + the 64th bit.
  for (int shift = 0; shift < 64; shift += 7) {
    if (pos_ >= size_) return Error("varint runs past the end");
    const uint8_t byte = data_[pos_++];
    if (shift == 63 && (byte & 0x7e) != 0) return Error("varint larger than 64 bits");
    value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) {
      *out = value;
      return common::Status::Ok();
    }
  }
  return Error("varint longer than 10 bytes");
}

common::Status CompactReader::ReadZigZag(int64_t* out) {
  uint64_t v = 0;
  EMBODY_RETURN_IF_ERROR(ReadVarint(&v));
  *out = static_cast<int64_t>((v >> 1) ^ (~(v & 1) + 1));
  return common::Status::Ok();
}

common::Status CompactReader::ReadFieldHeader(int16_t last_id, int16_t* id, ThriftType* type) {
  if (pos_ >= size_) return Error("struct runs past the end (no stop byte)");
  const uint8_t byte = data_[pos_++];
  const uint8_t t = byte & 0x0f;
  if (t > static_cast<uint8_t>(ThriftType::kStruct)) {
    return Error("unknown wire type " + std::to_string(t));
  }
  *type = static_cast<ThriftType>(t);
  if (*type == ThriftType::kStop) {
    if (byte != 0) return Error("malformed stop byte");
    return common::Status::Ok();
  }
  const int delta = byte >> 4;
  int64_t field_id = 0;
  if (delta != 0) {
    field_id = static_cast<int64_t>(last_id) + delta;
  } else {
    EMBODY_RETURN_IF_ERROR(ReadZigZag(&field_id));
  }
  if (field_id <= 0 || field_id > INT16_MAX) {
    return Error("field id " + std::to_string(field_id) + " out of range");
  }
  *id = static_cast<int16_t>(field_id);
  return common::Status::Ok();
}

common::Status CompactReader::ReadBool(ThriftType type, bool* out) {
  if (list_bool_depth_ == depth_) {
    // Inside a list a bool is one byte of its own. Writers differ on false (0 or 2); true is 1.
    if (type != ThriftType::kTrue && type != ThriftType::kFalse) return WrongType(type, "bool");
    if (pos_ >= size_) return Error("bool runs past the end");
    const uint8_t byte = data_[pos_++];
    if (byte > 2) return Error("bool byte " + std::to_string(byte));
    *out = byte == 1;
    return common::Status::Ok();
  }
  if (type == ThriftType::kTrue) {
    *out = true;
  } else if (type == ThriftType::kFalse) {
    *out = false;
  } else {
    return WrongType(type, "bool");
  }
  return common::Status::Ok();
}

common::Status CompactReader::ReadI8(ThriftType type, int8_t* out) {
  if (type != ThriftType::kI8) return WrongType(type, "i8");
  if (pos_ >= size_) return Error("i8 runs past the end");
  *out = static_cast<int8_t>(data_[pos_++]);
  return common::Status::Ok();
}

common::Status CompactReader::ReadI16(ThriftType type, int16_t* out) {
  if (type != ThriftType::kI16) return WrongType(type, "i16");
  int64_t v = 0;
  EMBODY_RETURN_IF_ERROR(ReadZigZag(&v));
  if (v < INT16_MIN || v > INT16_MAX) return Error("i16 out of range");
  *out = static_cast<int16_t>(v);
  return common::Status::Ok();
}

common::Status CompactReader::ReadI32(ThriftType type, int32_t* out) {
  if (type != ThriftType::kI32) return WrongType(type, "i32");
  int64_t v = 0;
  EMBODY_RETURN_IF_ERROR(ReadZigZag(&v));
  if (v < INT32_MIN || v > INT32_MAX) return Error("i32 out of range");
  *out = static_cast<int32_t>(v);
  return common::Status::Ok();
}

common::Status CompactReader::ReadI64(ThriftType type, int64_t* out) {
  if (type != ThriftType::kI64) return WrongType(type, "i64");
  return ReadZigZag(out);
}

common::Status CompactReader::ReadDouble(ThriftType type, double* out) {
  if (type != ThriftType::kDouble) return WrongType(type, "double");
  if (remaining() < 8) return Error("double runs past the end");
  uint64_t bits = 0;
  for (int i = 0; i < 8; ++i) bits |= static_cast<uint64_t>(data_[pos_ + i]) << (8 * i);
  std::memcpy(out, &bits, sizeof(bits));
  pos_ += 8;
  return common::Status::Ok();
}

common::Status CompactReader::ReadBinary(ThriftType type, std::string* out) {
  if (type != ThriftType::kBinary) return WrongType(type, "binary");
  uint64_t length = 0;
  EMBODY_RETURN_IF_ERROR(ReadVarint(&length));
  if (length > remaining()) {
    return Error("binary of " + std::to_string(length) + " bytes where " +
                 std::to_string(remaining()) + " remain");
  }
  out->assign(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(length));
  pos_ += static_cast<size_t>(length);
  return common::Status::Ok();
}

common::Status CompactReader::ReadListHeader(ThriftType type, ThriftType* element_type,
                                             uint32_t* count) {
  if (type != ThriftType::kList && type != ThriftType::kSet) return WrongType(type, "list");
  if (pos_ >= size_) return Error("list header runs past the end");
  const uint8_t byte = data_[pos_++];
  const uint8_t t = byte & 0x0f;
  if (t == 0 || t > static_cast<uint8_t>(ThriftType::kStruct)) {
    return Error("unknown list element type " + std::to_string(t));
  }
  *element_type = static_cast<ThriftType>(t);
  uint64_t n = byte >> 4;
  if (n == 15) EMBODY_RETURN_IF_ERROR(ReadVarint(&n));
  if (n > remaining()) {
    return Error("list of " + std::to_string(n) + " elements where " + std::to_string(remaining()) +
                 " bytes remain");
  }
  *count = static_cast<uint32_t>(n);
  return common::Status::Ok();
}

common::Status CompactReader::Skip(ThriftType type) {
  switch (type) {
    case ThriftType::kTrue:
    case ThriftType::kFalse: {
      bool ignored;
      return ReadBool(type, &ignored);
    }
    case ThriftType::kI8: {
      int8_t ignored;
      return ReadI8(type, &ignored);
    }
    case ThriftType::kI16:
    case ThriftType::kI32:
    case ThriftType::kI64: {
      uint64_t ignored;
      return ReadVarint(&ignored);
    }
    case ThriftType::kDouble: {
      double ignored;
      return ReadDouble(type, &ignored);
    }
    case ThriftType::kBinary: {
      uint64_t length = 0;
      EMBODY_RETURN_IF_ERROR(ReadVarint(&length));
      if (length > remaining()) return Error("binary runs past the end");
      pos_ += static_cast<size_t>(length);
      return common::Status::Ok();
    }
    case ThriftType::kList:
    case ThriftType::kSet:
      return ReadList(type, [this](ThriftType element) { return Skip(element); });
    case ThriftType::kMap: {
      uint64_t n = 0;
      EMBODY_RETURN_IF_ERROR(ReadVarint(&n));
      if (n == 0) return common::Status::Ok();
      if (pos_ >= size_) return Error("map header runs past the end");
      const uint8_t types = data_[pos_++];
      const uint8_t k = types >> 4, v = types & 0x0f;
      if (k == 0 || k > 12 || v == 0 || v > 12) return Error("unknown map element types");
      if (n > remaining())
        return Error("map of " + std::to_string(n) + " entries runs past the end");
      EMBODY_RETURN_IF_ERROR(EnterNested());
      // Map values that are bools are bytes, like list elements.
      const int saved = list_bool_depth_;
      list_bool_depth_ = depth_;
      common::Status status;
      for (uint64_t i = 0; i < n && status.ok(); ++i) {
        status = Skip(static_cast<ThriftType>(k));
        if (status.ok()) status = Skip(static_cast<ThriftType>(v));
      }
      list_bool_depth_ = saved;
      LeaveNested();
      return status;
    }
    case ThriftType::kStruct:
      return ReadStruct([this](int16_t, ThriftType field) { return Skip(field); });
    case ThriftType::kStop:
      break;
  }
  return Error(std::string("cannot skip a value of wire type ") + ThriftTypeName(type));
}

}  // namespace storage::parquet
