#include "storage/dtype.h"

namespace storage {

size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kU8:
      return 1;
    case DType::kI32:
      return 4;
    case DType::kF32:
      return 4;
    case DType::kF64:
      return 8;
  }
  return 0;
}

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kU8:
      return "u8";
    case DType::kI32:
      return "i32";
    case DType::kF32:
      return "f32";
    case DType::kF64:
      return "f64";
  }
  return "?";
}

std::optional<DType> DTypeFromName(const std::string& name) {
  for (DType t : {DType::kU8, DType::kI32, DType::kF32, DType::kF64}) {
    if (name == DTypeName(t)) return t;
  }
  return std::nullopt;
}

std::optional<DType> DTypeFromCode(uint8_t code) {
  if (code >= 1 && code <= 4) return static_cast<DType>(code);
  return std::nullopt;
}

}  // namespace storage
