#include "storage/testing/parquet_writer.h"

#include <snappy.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace storage::testing {

using parquet::ThriftType;

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

namespace {

void WriteStatistics(CompactWriter& w, const parquet::Statistics& s) {
  w.StructBegin();
  if (s.max) w.Binary(1, *s.max);
  if (s.min) w.Binary(2, *s.min);
  if (s.null_count) w.I64(3, *s.null_count);
  if (s.distinct_count) w.I64(4, *s.distinct_count);
  if (s.max_value) w.Binary(5, *s.max_value);
  if (s.min_value) w.Binary(6, *s.min_value);
  w.StructEnd();
}

void WriteSchemaElement(CompactWriter& w, const parquet::SchemaElement& e) {
  w.StructBegin();
  if (e.type) w.I32(1, static_cast<int32_t>(*e.type));
  if (e.type_length) w.I32(2, e.type_length);
  if (e.repetition) w.I32(3, static_cast<int32_t>(*e.repetition));
  w.Binary(4, e.name);
  if (e.num_children) w.I32(5, e.num_children);
  if (e.converted_type_raw >= 0) w.I32(6, e.converted_type_raw);
  if (e.logical_type != parquet::LogicalType::kNone) {
    w.FieldHeader(10, ThriftType::kStruct);
    w.StructBegin();
    w.FieldHeader(static_cast<int16_t>(e.logical_type), ThriftType::kStruct);
    w.StructBegin();
    w.StructEnd();
    w.StructEnd();
  }
  w.StructEnd();
}

void WriteColumnChunk(CompactWriter& w, const parquet::ColumnChunk& c) {
  w.StructBegin();
  if (c.file_path) w.Binary(1, *c.file_path);
  w.I64(2, c.file_offset);
  if (c.meta_data) {
    const parquet::ColumnMetaData& m = *c.meta_data;
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

std::string PackBits(const std::vector<uint32_t>& values, size_t begin, size_t count,
                     int bit_width) {
  std::string out((count * static_cast<size_t>(bit_width) + 7) / 8, '\0');
  uint64_t bit = 0;
  for (size_t i = 0; i < count; ++i) {
    const uint64_t v = begin + i < values.size() ? values[begin + i] : 0;
    for (int b = 0; b < bit_width; ++b, ++bit) {
      if ((v >> b) & 1) out[bit >> 3] = static_cast<char>(out[bit >> 3] | (1 << (bit & 7)));
    }
  }
  return out;
}

void AppendVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void AppendLE32(std::string* out, uint32_t v) {
  char b[4];
  std::memcpy(b, &v, 4);
  out->append(b, 4);
}

}  // namespace

std::string SerializeFileMetaData(const parquet::FileMetaData& m) {
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

std::string SerializePageHeader(const parquet::PageHeader& h) {
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
    const parquet::DataPageHeaderV2& d = *h.data_page_v2;
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

std::string EncodeRleHybrid(const std::vector<uint32_t>& values, int bit_width) {
  std::string out;
  const size_t n = values.size();
  auto run_at = [&](size_t i) {
    size_t j = i;
    while (j < n && values[j] == values[i]) ++j;
    return j - i;
  };
  size_t i = 0;
  while (i < n) {
    const size_t run = run_at(i);
    if (run >= 8) {
      AppendVarint(&out, static_cast<uint64_t>(run) << 1);
      for (int b = 0; b < (bit_width + 7) / 8; ++b) {
        out.push_back(static_cast<char>((values[i] >> (8 * b)) & 0xff));
      }
      i += run;
      continue;
    }
    // Groups of 8 literals until a long run starts on a group boundary.
    size_t j = i;
    do {
      j += 8;
    } while (j < n && run_at(j) < 8);
    const size_t count = std::min(j, n) - i;
    const size_t groups = (count + 7) / 8;
    AppendVarint(&out, (static_cast<uint64_t>(groups) << 1) | 1);
    out += PackBits(values, i, groups * 8, bit_width);
    i += count;
  }
  return out;
}

std::string EncodeBitPackedRun(const std::vector<uint32_t>& values, int bit_width) {
  std::string out;
  const size_t groups = (values.size() + 7) / 8;
  AppendVarint(&out, (static_cast<uint64_t>(groups) << 1) | 1);
  out += PackBits(values, 0, groups * 8, bit_width);
  return out;
}

std::string EncodeDeltaBinaryPacked(const std::vector<int64_t>& values, int block_size,
                                    int miniblocks, bool int32) {
  std::string out;
  auto zigzag = [](int64_t v) {
    return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
  };
  AppendVarint(&out, static_cast<uint64_t>(block_size));
  AppendVarint(&out, static_cast<uint64_t>(miniblocks));
  AppendVarint(&out, values.size());
  AppendVarint(&out, zigzag(values.empty() ? 0 : values[0]));
  const size_t per_mb = static_cast<size_t>(block_size / miniblocks);
  for (size_t start = 1; start < values.size(); start += static_cast<size_t>(block_size)) {
    const size_t end = std::min(values.size(), start + static_cast<size_t>(block_size));
    std::vector<int64_t> deltas;
    for (size_t i = start; i < end; ++i) {
      const uint64_t d = static_cast<uint64_t>(values[i]) - static_cast<uint64_t>(values[i - 1]);
      deltas.push_back(int32 ? static_cast<int32_t>(static_cast<uint32_t>(d))
                             : static_cast<int64_t>(d));
    }
    const int64_t min_delta = *std::min_element(deltas.begin(), deltas.end());
    AppendVarint(&out, zigzag(min_delta));
    std::vector<int> widths(static_cast<size_t>(miniblocks), 0);
    std::vector<uint64_t> adjusted;
    for (int64_t d : deltas) {
      const uint64_t a = static_cast<uint64_t>(d) - static_cast<uint64_t>(min_delta);
      adjusted.push_back(int32 ? static_cast<uint32_t>(a) : a);
    }
    for (size_t m = 0; m * per_mb < adjusted.size(); ++m) {
      uint64_t top = 0;
      for (size_t k = m * per_mb; k < std::min(adjusted.size(), (m + 1) * per_mb); ++k) {
        top |= adjusted[k];
      }
      widths[m] = top == 0 ? 0 : 64 - __builtin_clzll(top);
    }
    for (int wdt : widths) out.push_back(static_cast<char>(wdt));
    for (size_t m = 0; m * per_mb < adjusted.size(); ++m) {
      const int bw = widths[m];
      std::string packed((per_mb * static_cast<size_t>(bw) + 7) / 8, '\0');
      uint64_t bit = 0;
      for (size_t k = 0; k < per_mb; ++k) {
        const size_t idx = m * per_mb + k;
        const uint64_t v = idx < adjusted.size() ? adjusted[idx] : 0;
        for (int b = 0; b < bw; ++b, ++bit) {
          if ((v >> b) & 1) {
            packed[bit >> 3] = static_cast<char>(packed[bit >> 3] | (1 << (bit & 7)));
          }
        }
      }
      out += packed;
    }
  }
  return out;
}

std::string EncodeByteStreamSplit(const void* values, size_t count, int width) {
  const uint8_t* in = static_cast<const uint8_t*>(values);
  std::string out(count * static_cast<size_t>(width), '\0');
  for (size_t i = 0; i < count; ++i) {
    for (int k = 0; k < width; ++k)
      out[static_cast<size_t>(k) * count + i] = static_cast<char>(in[i * width + k]);
  }
  return out;
}

std::string CompressPage(int32_t codec, const std::string& raw) {
  switch (codec) {
    case 0:
      return raw;
    case 1: {
      std::string out;
      snappy::Compress(raw.data(), raw.size(), &out);
      return out;
    }
    case 6: {
      std::string out(ZSTD_compressBound(raw.size()), '\0');
      const size_t n = ZSTD_compress(out.data(), out.size(), raw.data(), raw.size(), 3);
      if (ZSTD_isError(n)) throw std::runtime_error("ZSTD_compress failed");
      out.resize(n);
      return out;
    }
    case 2: {
      z_stream zs;
      std::memset(&zs, 0, sizeof(zs));
      if (deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        throw std::runtime_error("deflateInit2 failed");
      }
      std::string out(deflateBound(&zs, raw.size()) + 32, '\0');
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
      zs.avail_in = static_cast<uInt>(raw.size());
      zs.next_out = reinterpret_cast<Bytef*>(out.data());
      zs.avail_out = static_cast<uInt>(out.size());
      const int rc = deflate(&zs, Z_FINISH);
      out.resize(zs.total_out);
      deflateEnd(&zs);
      if (rc != Z_STREAM_END) throw std::runtime_error("deflate failed");
      return out;
    }
    default:
      throw std::runtime_error("codec not supported by the test writer");
  }
}

namespace {

int ValueWidth(parquet::PhysicalType type) {
  return type == parquet::PhysicalType::kDouble || type == parquet::PhysicalType::kInt64 ? 8 : 4;
}

std::string WithLengthPrefix(const std::string& s) {
  std::string out;
  AppendLE32(&out, static_cast<uint32_t>(s.size()));
  return out + s;
}

}  // namespace

std::string WriteSimpleFile(const std::vector<SimpleColumn>& columns, int64_t rows,
                            const SimpleFileOptions& options) {
  using parquet::Encoding;
  using parquet::Repetition;
  std::string out = "PAR1";
  parquet::FileMetaData meta;
  meta.version = options.page_v2 ? 2 : 1;
  meta.num_rows = rows;
  meta.created_by = "embody test writer";
  parquet::SchemaElement root;
  root.name = "schema";
  root.num_children = static_cast<int32_t>(columns.size());
  meta.schema.push_back(root);
  for (const SimpleColumn& c : columns) {
    if (c.list_length == 0) {
      parquet::SchemaElement e;
      e.name = c.name;
      e.type = c.type;
      e.repetition = Repetition::kRequired;
      meta.schema.push_back(e);
      continue;
    }
    parquet::SchemaElement list, repeated, element;
    list.name = c.name;
    list.repetition = Repetition::kOptional;
    list.num_children = 1;
    list.converted_type_raw = 3;
    list.logical_type = parquet::LogicalType::kList;
    repeated.name = "list";
    repeated.repetition = Repetition::kRepeated;
    repeated.num_children = 1;
    element.name = "element";
    element.type = c.type;
    element.repetition = Repetition::kOptional;
    meta.schema.insert(meta.schema.end(), {list, repeated, element});
  }

  for (int64_t g0 = 0; g0 < rows; g0 += options.rows_per_row_group) {
    const int64_t g1 = std::min(rows, g0 + options.rows_per_row_group);
    parquet::RowGroup group;
    group.num_rows = g1 - g0;
    for (const SimpleColumn& c : columns) {
      const int64_t per_row = std::max(c.list_length, 1);
      const int width = ValueWidth(c.type);
      const uint64_t chunk_start = out.size();
      int64_t uncompressed_total = 0, num_values = 0;
      for (int64_t p0 = g0; p0 < g1; p0 += options.rows_per_page) {
        const int64_t p1 = std::min(g1, p0 + options.rows_per_page);
        const char* base = static_cast<const char*>(c.values);
        std::string values;
        std::vector<uint32_t> r, d;
        for (int64_t row = p0; row < p1; ++row) {
          const bool null_row =
              c.list_length > 0 && c.null_every > 0 && row % c.null_every == c.null_every - 1;
          if (null_row) {
            r.push_back(0);
            d.push_back(0);
            continue;
          }
          values.append(base + row * per_row * width, static_cast<size_t>(per_row * width));
          for (int64_t k = 0; k < per_row; ++k) {
            r.push_back(k == 0 ? 0 : 1);
            d.push_back(3);
          }
        }
        const int64_t entries = static_cast<int64_t>(r.size());
        std::string rep, def;
        if (c.list_length > 0) {
          rep = EncodeRleHybrid(r, 1);
          def = EncodeRleHybrid(d, 2);
        }
        parquet::PageHeader h;
        std::string body;
        if (!options.page_v2) {
          std::string raw = c.list_length > 0 ? WithLengthPrefix(rep) + WithLengthPrefix(def) : "";
          raw += values;
          body = CompressPage(options.codec, raw);
          h.type = static_cast<int32_t>(parquet::PageType::kDataPage);
          h.uncompressed_page_size = static_cast<int32_t>(raw.size());
          h.data_page = parquet::DataPageHeader{
              static_cast<int32_t>(entries), static_cast<int32_t>(Encoding::kPlain),
              static_cast<int32_t>(Encoding::kRle), static_cast<int32_t>(Encoding::kRle)};
        } else {
          body = rep + def + CompressPage(options.codec, values);
          h.type = static_cast<int32_t>(parquet::PageType::kDataPageV2);
          h.uncompressed_page_size = static_cast<int32_t>(rep.size() + def.size() + values.size());
          parquet::DataPageHeaderV2 v2;
          v2.num_values = static_cast<int32_t>(entries);
          v2.num_rows = static_cast<int32_t>(p1 - p0);
          v2.encoding = static_cast<int32_t>(Encoding::kPlain);
          v2.definition_levels_byte_length = static_cast<int32_t>(def.size());
          v2.repetition_levels_byte_length = static_cast<int32_t>(rep.size());
          h.data_page_v2 = v2;
        }
        h.compressed_page_size = static_cast<int32_t>(body.size());
        num_values += entries;
        const std::string header = SerializePageHeader(h);
        out += header;
        out += body;
        uncompressed_total += static_cast<int64_t>(header.size()) + h.uncompressed_page_size;
      }
      parquet::ColumnChunk chunk;
      chunk.file_offset = static_cast<int64_t>(chunk_start);
      parquet::ColumnMetaData& md = chunk.meta_data.emplace();
      md.type = c.type;
      md.encodings = {static_cast<int32_t>(Encoding::kPlain), static_cast<int32_t>(Encoding::kRle)};
      md.path_in_schema = c.list_length > 0 ? std::vector<std::string>{c.name, "list", "element"}
                                            : std::vector<std::string>{c.name};
      md.codec = options.codec;
      md.num_values = num_values;
      md.total_uncompressed_size = uncompressed_total;
      md.total_compressed_size = static_cast<int64_t>(out.size() - chunk_start);
      md.data_page_offset = static_cast<int64_t>(chunk_start);
      group.total_byte_size += uncompressed_total;
      group.columns.push_back(std::move(chunk));
    }
    meta.row_groups.push_back(std::move(group));
  }
  const std::string footer = SerializeFileMetaData(meta);
  out += footer;
  AppendLE32(&out, static_cast<uint32_t>(footer.size()));
  out += "PAR1";
  return out;
}

}  // namespace storage::testing
