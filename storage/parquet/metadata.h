// Parquet's file and page metadata as plain structs, and their parsing from the Thrift compact
// bytes (parquet.thrift in the format's specification). Only what a reader needs is kept:
// schema elements, row groups, column chunks with their meta data and statistics, and page
// headers. Unknown fields, and known ones we do not use (bloom filters, page indexes, encryption
// parameters), are skipped, so files from newer writers still open.
//
// Parsing checks what the protocol cannot: required fields present, enum values in range,
// sizes and counts not negative. Whether the numbers agree with each other and with the file
// (offsets inside it, a schema that is a tree) is checked by schema.cc and reader.cc.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace storage::parquet {

enum class PhysicalType : int8_t {
  kBoolean = 0,
  kInt32 = 1,
  kInt64 = 2,
  kInt96 = 3,
  kFloat = 4,
  kDouble = 5,
  kByteArray = 6,
  kFixedLenByteArray = 7,
};
const char* PhysicalTypeName(PhysicalType type);

enum class Repetition : int8_t { kRequired = 0, kOptional = 1, kRepeated = 2 };

// ConvertedType values as in the specification (UTF8 = 0, LIST = 3, ...); -1 when absent.
enum class ConvertedType : int8_t {
  kNone = -1,
  kUtf8 = 0,
  kMap = 1,
  kMapKeyValue = 2,
  kList = 3,
  kEnum = 4,
  kDecimal = 5,
  kJson = 19,
};

// Which member of the LogicalType union a schema element carries (its field id), kNone when
// absent. Parameters of DECIMAL, TIMESTAMP and INTEGER are not kept: the readers here do not
// reinterpret values.
enum class LogicalType : int8_t {
  kNone = 0,
  kString = 1,
  kMap = 2,
  kList = 3,
  kEnum = 4,
  kDecimal = 5,
  kDate = 6,
  kTime = 7,
  kTimestamp = 8,
  kInteger = 10,
  kUnknown = 11,
  kJson = 12,
  kBson = 13,
  kUuid = 14,
  kFloat16 = 15,
  kOther = 127,  // a member this reader does not know
};

enum class Encoding : int8_t {
  kPlain = 0,
  kPlainDictionary = 2,
  kRle = 3,
  kBitPacked = 4,
  kDeltaBinaryPacked = 5,
  kDeltaLengthByteArray = 6,
  kDeltaByteArray = 7,
  kRleDictionary = 8,
  kByteStreamSplit = 9,
};
const char* EncodingName(int32_t encoding);  // any i32, for messages about unknown ones

enum class Codec : int8_t {
  kUncompressed = 0,
  kSnappy = 1,
  kGzip = 2,
  kLzo = 3,
  kBrotli = 4,
  kLz4 = 5,
  kZstd = 6,
  kLz4Raw = 7,
};
const char* CodecName(int32_t codec);

enum class PageType : int8_t {
  kDataPage = 0,
  kIndexPage = 1,
  kDictionaryPage = 2,
  kDataPageV2 = 3
};

struct SchemaElement {
  std::string name;
  std::optional<PhysicalType> type;      // set for leaves only
  int32_t type_length = 0;               // FIXED_LEN_BYTE_ARRAY width
  std::optional<Repetition> repetition;  // absent only for the root
  int32_t num_children = 0;
  ConvertedType converted_type = ConvertedType::kNone;
  int32_t converted_type_raw = -1;  // the number as written, for converted types not named above
  LogicalType logical_type = LogicalType::kNone;
  int32_t scale = 0, precision = 0;
  std::optional<int32_t> field_id;
};

struct Statistics {
  std::optional<std::string> min_value, max_value;  // PLAIN encoded, as the writer stored them
  std::optional<std::string> min, max;              // the deprecated pair (signed order)
  std::optional<int64_t> null_count, distinct_count;
};

struct ColumnMetaData {
  PhysicalType type = PhysicalType::kBoolean;
  std::vector<int32_t> encodings;  // raw numbers: unknown ones are allowed here
  std::vector<std::string> path_in_schema;
  int32_t codec = 0;  // raw: checked when a page is decompressed
  int64_t num_values = 0;
  int64_t total_uncompressed_size = 0;
  int64_t total_compressed_size = 0;
  int64_t data_page_offset = 0;
  std::optional<int64_t> index_page_offset;
  std::optional<int64_t> dictionary_page_offset;
  std::optional<Statistics> statistics;
};

struct ColumnChunk {
  std::optional<std::string> file_path;  // data in another file: not supported by the reader
  int64_t file_offset = 0;
  std::optional<ColumnMetaData> meta_data;
  bool encrypted = false;  // crypto_metadata or encrypted_column_metadata present
};

struct RowGroup {
  std::vector<ColumnChunk> columns;
  int64_t total_byte_size = 0;
  int64_t num_rows = 0;
  std::optional<int64_t> file_offset;
  std::optional<int64_t> total_compressed_size;
};

struct KeyValue {
  std::string key;
  std::optional<std::string> value;
};

struct FileMetaData {
  int32_t version = 0;
  std::vector<SchemaElement> schema;  // depth-first, the root first
  int64_t num_rows = 0;
  std::vector<RowGroup> row_groups;
  std::vector<KeyValue> key_value_metadata;
  std::optional<std::string> created_by;
  bool encrypted = false;  // encryption_algorithm present (a plaintext footer of an encrypted file)
};

struct DataPageHeader {
  int32_t num_values = 0;
  int32_t encoding = 0;
  int32_t definition_level_encoding = 0;
  int32_t repetition_level_encoding = 0;
};

struct DictionaryPageHeader {
  int32_t num_values = 0;
  int32_t encoding = 0;
  bool is_sorted = false;
};

struct DataPageHeaderV2 {
  int32_t num_values = 0;
  int32_t num_nulls = 0;
  int32_t num_rows = 0;
  int32_t encoding = 0;
  int32_t definition_levels_byte_length = 0;
  int32_t repetition_levels_byte_length = 0;
  bool is_compressed = true;
};

struct PageHeader {
  int32_t type = 0;  // raw: an unknown page type is skipped, not an error
  int32_t uncompressed_page_size = 0;
  int32_t compressed_page_size = 0;
  std::optional<int32_t> crc;
  std::optional<DataPageHeader> data_page;
  std::optional<DictionaryPageHeader> dictionary_page;
  std::optional<DataPageHeaderV2> data_page_v2;
};

// Parses the footer's FileMetaData from exactly `size` bytes.
common::Status ParseFileMetaData(const uint8_t* data, size_t size, FileMetaData* out);

// Parses a page header at the start of `data`; `*header_size` is how many bytes it took. The
// page's body follows it.
common::Status ParsePageHeader(const uint8_t* data, size_t size, PageHeader* out,
                               size_t* header_size);

}  // namespace storage::parquet
