// The names of Parquet's physical types, encodings and codecs, as the specification spells them,
// for error messages and tools.
#include "storage/parquet/metadata.h"

namespace storage::parquet {

const char* PhysicalTypeName(PhysicalType type) {
  switch (type) {
    case PhysicalType::kBoolean:
      return "BOOLEAN";
    case PhysicalType::kInt32:
      return "INT32";
    case PhysicalType::kInt64:
      return "INT64";
    case PhysicalType::kInt96:
      return "INT96";
    case PhysicalType::kFloat:
      return "FLOAT";
    case PhysicalType::kDouble:
      return "DOUBLE";
    case PhysicalType::kByteArray:
      return "BYTE_ARRAY";
    case PhysicalType::kFixedLenByteArray:
      return "FIXED_LEN_BYTE_ARRAY";
  }
  return "?";
}

const char* EncodingName(int32_t encoding) {
  switch (encoding) {
    case 0:
      return "PLAIN";
    case 2:
      return "PLAIN_DICTIONARY";
    case 3:
      return "RLE";
    case 4:
      return "BIT_PACKED";
    case 5:
      return "DELTA_BINARY_PACKED";
    case 6:
      return "DELTA_LENGTH_BYTE_ARRAY";
    case 7:
      return "DELTA_BYTE_ARRAY";
    case 8:
      return "RLE_DICTIONARY";
    case 9:
      return "BYTE_STREAM_SPLIT";
    case 10:
      return "ALP";
    default:
      return "unknown encoding";
  }
}

const char* CodecName(int32_t codec) {
  switch (codec) {
    case 0:
      return "UNCOMPRESSED";
    case 1:
      return "SNAPPY";
    case 2:
      return "GZIP";
    case 3:
      return "LZO";
    case 4:
      return "BROTLI";
    case 5:
      return "LZ4";
    case 6:
      return "ZSTD";
    case 7:
      return "LZ4_RAW";
    default:
      return "unknown codec";
  }
}

}  // namespace storage::parquet
