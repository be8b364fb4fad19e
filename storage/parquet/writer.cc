#include "storage/parquet/writer.h"

#include <snappy.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <set>

#include "common/file_util.h"
#include "storage/parquet/metadata_writer.h"
#include "storage/parquet/rle.h"

namespace storage::parquet {

// PLAIN values are the elements' little-endian bytes; this writer copies them from memory.
static_assert(std::endian::native == std::endian::little, "the writer assumes a little-endian host");

namespace {

using Column = TableWriter::Column;

// Levels of a LIST column whose list and elements are optional: a row of k > 0 elements is
// (rep 0, def 3) then (rep 1, def 3) k-1 times; an empty list is (rep 0, def 1).
constexpr uint8_t kDefElement = 3;
constexpr uint8_t kDefEmptyList = 1;

int64_t ValueWidth(PhysicalType t) {
  return t == PhysicalType::kInt64 || t == PhysicalType::kDouble ? 8 : 4;
}

// PLAIN bytes of elements [e0, e1).
void AppendPlain(const Column& c, int64_t e0, int64_t e1, std::string* out) {
  if (c.type != PhysicalType::kByteArray) {
    const int64_t w = ValueWidth(c.type);
    out->append(c.fixed, static_cast<size_t>(e0 * w), static_cast<size_t>((e1 - e0) * w));
    return;
  }
  for (int64_t e = e0; e < e1; ++e) {
    const std::string& s = c.strings[static_cast<size_t>(e)];
    const uint32_t n = static_cast<uint32_t>(s.size());
    char len[4];
    std::memcpy(len, &n, 4);
    out->append(len, 4);
    out->append(s);
  }
}

int64_t ElementBytes(const Column& c, int64_t e0, int64_t e1) {
  if (c.type != PhysicalType::kByteArray) return (e1 - e0) * ValueWidth(c.type);
  int64_t n = 0;
  for (int64_t e = e0; e < e1; ++e) n += 4 + static_cast<int64_t>(c.strings[e].size());
  return n;
}

void AppendLengthPrefixed(const std::string& s, std::string* out) {
  const uint32_t n = static_cast<uint32_t>(s.size());
  char len[4];
  std::memcpy(len, &n, 4);
  out->append(len, 4);
  out->append(s);
}

struct Page {
  std::string header_and_body;
  int64_t uncompressed = 0;  // header + uncompressed body
  int64_t num_values = 0;
};

// One v1 data page of rows [r0, r1).
Page WritePage(const Column& c, int64_t r0, int64_t r1, Codec codec) {
  std::string raw;
  int64_t entries = r1 - r0;
  if (c.list) {
    std::vector<uint8_t> rep, def;
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = c.offsets[r + 1] - c.offsets[r];
      if (n == 0) {
        rep.push_back(0);
        def.push_back(kDefEmptyList);
        continue;
      }
      rep.push_back(0);
      rep.insert(rep.end(), static_cast<size_t>(n - 1), 1);
      def.insert(def.end(), static_cast<size_t>(n), kDefElement);
    }
    entries = static_cast<int64_t>(rep.size());
    std::string levels;
    AppendRleBitPacked(rep.data(), rep.size(), 1, &levels);
    AppendLengthPrefixed(levels, &raw);
    levels.clear();
    AppendRleBitPacked(def.data(), def.size(), 2, &levels);
    AppendLengthPrefixed(levels, &raw);
    AppendPlain(c, c.offsets[r0], c.offsets[r1], &raw);
  } else {
    AppendPlain(c, r0, r1, &raw);
  }
  const size_t raw_size = raw.size();
  std::string body;
  if (codec == Codec::kSnappy) {
    snappy::Compress(raw.data(), raw.size(), &body);
  } else {
    body = std::move(raw);
  }
  PageHeader h;
  h.type = static_cast<int32_t>(PageType::kDataPage);
  h.uncompressed_page_size = static_cast<int32_t>(raw_size);
  h.compressed_page_size = static_cast<int32_t>(body.size());
  h.data_page = DataPageHeader{static_cast<int32_t>(entries),
                               static_cast<int32_t>(Encoding::kPlain),
                               static_cast<int32_t>(Encoding::kRle),
                               static_cast<int32_t>(Encoding::kRle)};
  Page p;
  p.header_and_body = SerializePageHeader(h);
  p.uncompressed = static_cast<int64_t>(p.header_and_body.size() + raw_size);
  p.header_and_body += body;
  p.num_values = entries;
  return p;
}

void AddSchema(const Column& c, FileMetaData* meta) {
  SchemaElement leaf;
  leaf.type = c.type;
  if (c.utf8) {
    leaf.converted_type_raw = static_cast<int32_t>(ConvertedType::kUtf8);
    leaf.logical_type = LogicalType::kString;
  }
  if (!c.list) {
    leaf.name = c.name;
    leaf.repetition = Repetition::kRequired;
    meta->schema.push_back(leaf);
    return;
  }
  SchemaElement group, repeated;
  group.name = c.name;
  group.repetition = Repetition::kOptional;
  group.num_children = 1;
  group.converted_type_raw = static_cast<int32_t>(ConvertedType::kList);
  group.logical_type = LogicalType::kList;
  repeated.name = "list";
  repeated.repetition = Repetition::kRepeated;
  repeated.num_children = 1;
  leaf.name = "element";
  leaf.repetition = Repetition::kOptional;
  meta->schema.insert(meta->schema.end(), {group, repeated, leaf});
}

common::Status Check(const std::vector<Column>& columns, const WriterOptions& options) {
  if (columns.empty()) return common::InvalidArgument("a Parquet file needs at least one column");
  if (options.codec != Codec::kSnappy && options.codec != Codec::kUncompressed) {
    return common::InvalidArgument(std::string("the writer does not write ") +
                                   CodecName(static_cast<int32_t>(options.codec)) + " pages");
  }
  if (options.page_bytes < 1 || options.row_group_rows < 1) {
    return common::InvalidArgument("page_bytes and row_group_rows must be positive");
  }
  std::set<std::string> names;
  for (const Column& c : columns) {
    const std::string what = "column '" + c.name + "'";
    if (c.name.empty()) return common::InvalidArgument("a column has an empty name");
    if (!names.insert(c.name).second) return common::InvalidArgument(what + " is given twice");
    if (c.rows != columns.front().rows) {
      return common::InvalidArgument(what + " has " + std::to_string(c.rows) + " rows, column '" +
                                     columns.front().name + "' " +
                                     std::to_string(columns.front().rows));
    }
    const int64_t have = c.type == PhysicalType::kByteArray
                             ? static_cast<int64_t>(c.strings.size())
                             : static_cast<int64_t>(c.fixed.size()) / ValueWidth(c.type);
    if (!c.list) continue;
    if (c.offsets.size() != static_cast<size_t>(c.rows) + 1 || c.offsets.front() != 0 ||
        c.offsets.back() != have) {
      return common::InvalidArgument(what + ": offsets must run from 0 to the " +
                                     std::to_string(have) + " values, one per row and one more");
    }
    for (size_t i = 1; i < c.offsets.size(); ++i) {
      if (c.offsets[i] < c.offsets[i - 1]) {
        return common::InvalidArgument(what + ": offsets decrease at row " + std::to_string(i - 1));
      }
      if (c.offsets[i] - c.offsets[i - 1] > INT32_MAX / 2) {
        return common::InvalidArgument(what + ": row " + std::to_string(i - 1) + " is too long");
      }
    }
  }
  return common::Status::Ok();
}

TableWriter::Column NewColumn(std::string name, PhysicalType type, bool utf8, bool list) {
  Column c;
  c.name = std::move(name);
  c.type = type;
  c.utf8 = utf8;
  c.list = list;
  return c;
}

}  // namespace

std::vector<int64_t> FixedOffsets(int64_t rows, int64_t length) {
  std::vector<int64_t> offsets(static_cast<size_t>(rows) + 1);
  for (int64_t r = 0; r <= rows; ++r) offsets[r] = r * length;
  return offsets;
}

void TableWriter::AddInt64(std::string name, const std::vector<int64_t>& values) {
  Column c = NewColumn(std::move(name), PhysicalType::kInt64, false, false);
  c.fixed.assign(reinterpret_cast<const char*>(values.data()), values.size() * 8);
  c.rows = static_cast<int64_t>(values.size());
  columns_.push_back(std::move(c));
}

void TableWriter::AddFloat(std::string name, const std::vector<float>& values) {
  Column c = NewColumn(std::move(name), PhysicalType::kFloat, false, false);
  c.fixed.assign(reinterpret_cast<const char*>(values.data()), values.size() * 4);
  c.rows = static_cast<int64_t>(values.size());
  columns_.push_back(std::move(c));
}

void TableWriter::AddDouble(std::string name, const std::vector<double>& values) {
  Column c = NewColumn(std::move(name), PhysicalType::kDouble, false, false);
  c.fixed.assign(reinterpret_cast<const char*>(values.data()), values.size() * 8);
  c.rows = static_cast<int64_t>(values.size());
  columns_.push_back(std::move(c));
}

void TableWriter::AddString(std::string name, std::vector<std::string> values) {
  Column c = NewColumn(std::move(name), PhysicalType::kByteArray, /*utf8=*/true, false);
  c.rows = static_cast<int64_t>(values.size());
  c.strings = std::move(values);
  columns_.push_back(std::move(c));
}

void TableWriter::AddFloatList(std::string name, const std::vector<float>& values,
                               std::vector<int64_t> offsets) {
  Column c = NewColumn(std::move(name), PhysicalType::kFloat, false, /*list=*/true);
  c.fixed.assign(reinterpret_cast<const char*>(values.data()), values.size() * 4);
  c.rows = offsets.empty() ? 0 : static_cast<int64_t>(offsets.size()) - 1;
  c.offsets = std::move(offsets);
  if (c.offsets.empty()) c.offsets.push_back(0);
  columns_.push_back(std::move(c));
}

void TableWriter::AddStringList(std::string name,
                                const std::vector<std::vector<std::string>>& rows) {
  Column c = NewColumn(std::move(name), PhysicalType::kByteArray, /*utf8=*/true, /*list=*/true);
  c.offsets.push_back(0);
  for (const auto& row : rows) {
    c.strings.insert(c.strings.end(), row.begin(), row.end());
    c.offsets.push_back(static_cast<int64_t>(c.strings.size()));
  }
  c.rows = static_cast<int64_t>(rows.size());
  columns_.push_back(std::move(c));
}

void TableWriter::AddKeyValue(std::string key, std::string value) {
  key_values_.push_back(KeyValue{std::move(key), std::move(value)});
}

common::Result<std::string> TableWriter::Finish() const {
  EMBODY_RETURN_IF_ERROR(Check(columns_, options_));
  FileMetaData meta;
  meta.version = 1;
  meta.created_by = options_.created_by;
  meta.key_value_metadata = key_values_;
  const int64_t rows = columns_.front().rows;
  meta.num_rows = rows;
  SchemaElement root;
  root.name = "schema";
  root.num_children = static_cast<int32_t>(columns_.size());
  meta.schema.push_back(root);
  for (const Column& c : columns_) AddSchema(c, &meta);

  std::string out = "PAR1";
  for (int64_t g0 = 0; g0 < rows; g0 += options_.row_group_rows) {
    const int64_t g1 = std::min(rows, g0 + options_.row_group_rows);
    RowGroup group;
    group.num_rows = g1 - g0;
    for (const Column& c : columns_) {
      const int64_t chunk_start = static_cast<int64_t>(out.size());
      int64_t uncompressed = 0, num_values = 0;
      // Whole rows per page, about page_bytes of values each (a longer row is a page alone).
      for (int64_t p0 = g0; p0 < g1;) {
        int64_t p1 = p0, bytes = 0;
        while (p1 < g1 && (p1 == p0 || bytes < options_.page_bytes)) {
          const int64_t e0 = c.list ? c.offsets[p1] : p1;
          const int64_t e1 = c.list ? c.offsets[p1 + 1] : p1 + 1;
          bytes += ElementBytes(c, e0, e1) + (c.list ? 1 : 0);
          ++p1;
        }
        Page page = WritePage(c, p0, p1, options_.codec);
        out += page.header_and_body;
        uncompressed += page.uncompressed;
        num_values += page.num_values;
        p0 = p1;
      }
      ColumnChunk chunk;
      chunk.file_offset = chunk_start;
      ColumnMetaData& md = chunk.meta_data.emplace();
      md.type = c.type;
      md.encodings = {static_cast<int32_t>(Encoding::kPlain), static_cast<int32_t>(Encoding::kRle)};
      md.path_in_schema = c.list ? std::vector<std::string>{c.name, "list", "element"}
                                 : std::vector<std::string>{c.name};
      md.codec = static_cast<int32_t>(options_.codec);
      md.num_values = num_values;
      md.total_uncompressed_size = uncompressed;
      md.total_compressed_size = static_cast<int64_t>(out.size()) - chunk_start;
      md.data_page_offset = chunk_start;
      group.total_byte_size += uncompressed;
      group.columns.push_back(std::move(chunk));
    }
    meta.row_groups.push_back(std::move(group));
  }
  const std::string footer = SerializeFileMetaData(meta);
  out += footer;
  const uint32_t footer_size = static_cast<uint32_t>(footer.size());
  char len[4];
  std::memcpy(len, &footer_size, 4);
  out.append(len, 4);
  out += "PAR1";
  return out;
}

common::Status TableWriter::WriteFile(const std::string& path) const {
  EMBODY_ASSIGN_OR_RETURN(bytes, Finish());
  return common::WriteFileAtomic(path, bytes);
}

}  // namespace storage::parquet
