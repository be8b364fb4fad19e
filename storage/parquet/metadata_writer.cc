#include "storage/parquet/metadata_writer.h"

#include "storage/parquet/thrift_compact_writer.h"

namespace storage::parquet {

namespace {

void WriteStatistics(CompactWriter& w, const Statistics& s) {
  w.StructBegin();
  if (s.max) w.Binary(1, *s.max);
  if (s.min) w.Binary(2, *s.min);
  if (s.null_count) w.I64(3, *s.null_count);
  if (s.distinct_count) w.I64(4, *s.distinct_count);
  if (s.max_value) w.Binary(5, *s.max_value);
  if (s.min_value) w.Binary(6, *s.min_value);
  w.StructEnd();
}

void WriteSchemaElement(CompactWriter& w, const SchemaElement& e) {
  w.StructBegin();
  if (e.type) w.I32(1, static_cast<int32_t>(*e.type));
  if (e.type_length) w.I32(2, e.type_length);
  if (e.repetition) w.I32(3, static_cast<int32_t>(*e.repetition));
  w.Binary(4, e.name);
  if (e.num_children) w.I32(5, e.num_children);
  if (e.converted_type_raw >= 0) w.I32(6, e.converted_type_raw);
  if (e.logical_type != LogicalType::kNone) {
    w.FieldHeader(10, ThriftType::kStruct);
    w.StructBegin();
    w.FieldHeader(static_cast<int16_t>(e.logical_type), ThriftType::kStruct);
    w.StructBegin();
    w.StructEnd();
    w.StructEnd();
  }
  w.StructEnd();
}

void WriteColumnChunk(CompactWriter& w, const ColumnChunk& c) {
  w.StructBegin();
  if (c.file_path) w.Binary(1, *c.file_path);
  w.I64(2, c.file_offset);
  if (c.meta_data) {
    const ColumnMetaData& m = *c.meta_data;
    w.FieldHeader(3, ThriftType::kStruct);
    w.StructBegin();
    w.I32(1, static_cast<int32_t>(m.type));
    w.ListBegin(2, ThriftType::kI32, static_cast<uint32_t>(m.encodings.size()));
    for (int32_t e : m.encodings) w.ZigZag(e);
    w.ListBegin(3, ThriftType::kBinary, static_cast<uint32_t>(m.path_in_schema.size()));
    for (const std::string& p : m.path_in_schema) w.RawBinary(p);
    w.I32(4, m.codec);
    w.I64(5, m.num_values);
    w.I64(6, m.total_uncompressed_size);
    w.I64(7, m.total_compressed_size);
    w.I64(9, m.data_page_offset);
    if (m.index_page_offset) w.I64(10, *m.index_page_offset);
    if (m.dictionary_page_offset) w.I64(11, *m.dictionary_page_offset);
    if (m.statistics) {
      w.FieldHeader(12, ThriftType::kStruct);
      WriteStatistics(w, *m.statistics);
    }
    w.StructEnd();
  }
  w.StructEnd();
}

}  // namespace

std::string SerializeFileMetaData(const FileMetaData& m) {
  CompactWriter w;
  w.StructBegin();
  w.I32(1, m.version);
  w.ListBegin(2, ThriftType::kStruct, static_cast<uint32_t>(m.schema.size()));
  for (const auto& e : m.schema) WriteSchemaElement(w, e);
  w.I64(3, m.num_rows);
  w.ListBegin(4, ThriftType::kStruct, static_cast<uint32_t>(m.row_groups.size()));
  for (const auto& g : m.row_groups) {
    w.StructBegin();
    w.ListBegin(1, ThriftType::kStruct, static_cast<uint32_t>(g.columns.size()));
    for (const auto& c : g.columns) WriteColumnChunk(w, c);
    w.I64(2, g.total_byte_size);
    w.I64(3, g.num_rows);
    w.StructEnd();
  }
  if (!m.key_value_metadata.empty()) {
    w.ListBegin(5, ThriftType::kStruct, static_cast<uint32_t>(m.key_value_metadata.size()));
    for (const auto& kv : m.key_value_metadata) {
      w.StructBegin();
      w.Binary(1, kv.key);
      if (kv.value) w.Binary(2, *kv.value);
      w.StructEnd();
    }
  }
  if (m.created_by) w.Binary(6, *m.created_by);
  w.StructEnd();
  return w.bytes();
}

std::string SerializePageHeader(const PageHeader& h) {
  CompactWriter w;
  w.StructBegin();
  w.I32(1, h.type);
  w.I32(2, h.uncompressed_page_size);
  w.I32(3, h.compressed_page_size);
  if (h.crc) w.I32(4, *h.crc);
  if (h.data_page) {
    w.FieldHeader(5, ThriftType::kStruct);
    w.StructBegin();
    w.I32(1, h.data_page->num_values);
    w.I32(2, h.data_page->encoding);
    w.I32(3, h.data_page->definition_level_encoding);
    w.I32(4, h.data_page->repetition_level_encoding);
    w.StructEnd();
  }
  if (h.dictionary_page) {
    w.FieldHeader(7, ThriftType::kStruct);
    w.StructBegin();
    w.I32(1, h.dictionary_page->num_values);
    w.I32(2, h.dictionary_page->encoding);
    w.Bool(3, h.dictionary_page->is_sorted);
    w.StructEnd();
  }
  if (h.data_page_v2) {
    const DataPageHeaderV2& d = *h.data_page_v2;
    w.FieldHeader(8, ThriftType::kStruct);
    w.StructBegin();
    w.I32(1, d.num_values);
    w.I32(2, d.num_nulls);
    w.I32(3, d.num_rows);
    w.I32(4, d.encoding);
    w.I32(5, d.definition_levels_byte_length);
    w.I32(6, d.repetition_levels_byte_length);
    w.Bool(7, d.is_compressed);
    w.StructEnd();
  }
  w.StructEnd();
  return w.bytes();
}

}  // namespace storage::parquet
