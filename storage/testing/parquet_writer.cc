#include "storage/testing/parquet_writer.h"

#include <snappy.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace storage::testing {

using parquet::ThriftType;

namespace {

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
