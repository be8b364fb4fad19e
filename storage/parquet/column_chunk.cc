// DecodeColumnChunk: a column chunk walked page by page (headers, bounds, the dictionary page),
// each data page handed to column_chunk_pages.cc; and the output reserved up front.
#include "storage/parquet/column_chunk.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include "storage/parquet/column_chunk_decoder.h"
#include "storage/parquet/compression.h"
#include "storage/parquet/encodings.h"

namespace storage::parquet {

namespace column_chunk_internal {

uint64_t ChunkDecoder::BytesLeft() const {
  const uint64_t used = out_->values.ByteSize() + out_->def_levels.size() +
                        out_->rep_levels.size() + 8 * out_->row_starts.size();
  return used >= options_.max_decoded_bytes ? 0 : options_.max_decoded_bytes - used;
}

Status ChunkDecoder::Header(ChunkWindow& chunk, uint64_t pos, PageHeader* h, size_t* header_size) {
  const uint64_t left = chunk.length() - pos;
  size_t probe = static_cast<size_t>(std::min<uint64_t>(left, 64 << 10));
  while (true) {
    const uint8_t* p = nullptr;
    EMBODY_RETURN_IF_ERROR(chunk.View(pos, probe, &p));
    *h = PageHeader();
    Status s = ParsePageHeader(p, probe, h, header_size);
    if (s.ok() || probe == left) return s;
    if (probe >= options_.max_page_bytes) {
      return Exhausted("a page header longer than " + std::to_string(options_.max_page_bytes) +
                       " bytes");
    }
    probe = static_cast<size_t>(std::min<uint64_t>(left, uint64_t{probe} * 4));
  }
}

Status ChunkDecoder::Run(ChunkWindow& chunk) {
  if (out_->num_levels == 0 && out_->values.size() == 0) {
    out_->column = column_.index;
    out_->max_def = column_.max_def;
    out_->max_rep = column_.max_rep;
    out_->def_levels.clear();
    out_->rep_levels.clear();
    out_->row_starts.clear();
    out_->values.Reset(column_.type, column_.type_length);
  } else if (out_->column != column_.index || out_->values.type != column_.type) {
    return common::Internal("appending a chunk to the values of another column");
  }
  start_levels_ = out_->num_levels;
  defs_implicit_ = column_.max_def > 0 && out_->def_levels.empty();
  if (num_values_ > options_.max_column_values) {
    return Exhausted("the column chunk has " + std::to_string(num_values_) +
                     " values, more than the " + std::to_string(options_.max_column_values) +
                     " allowed");
  }
  ReserveEntries(column_, num_values_, chunk.length(), options_, out_);

  const uint64_t size = chunk.length();
  uint64_t pos = 0;
  for (int page = 0; pos < size && ChunkLevels() < num_values_; ++page) {
    PageHeader h;
    size_t header_size = 0;
    Status s = Header(chunk, pos, &h, &header_size);
    if (s.ok() && static_cast<uint64_t>(h.compressed_page_size) > size - pos - header_size) {
      s = common::InvalidArgument("page of " + std::to_string(h.compressed_page_size) +
                                  " bytes runs past the column chunk's end (" +
                                  std::to_string(size - pos - header_size) + " bytes left)");
    }
    const uint8_t* body = nullptr;
    if (s.ok() && static_cast<uint64_t>(h.compressed_page_size) > options_.max_page_bytes) {
      s = Exhausted("page of " + std::to_string(h.compressed_page_size) +
                    " compressed bytes is larger than the " +
                    std::to_string(options_.max_page_bytes) + " allowed");
    }
    if (s.ok()) {
      s = chunk.View(pos + header_size, static_cast<size_t>(h.compressed_page_size), &body);
    }
    if (s.ok()) s = Page(h, body);
    if (!s.ok()) {
      return Status(s.code(), "page " + std::to_string(page) + " (byte " + std::to_string(pos) +
                                  " of the chunk): " + s.message());
    }
    pos += header_size + static_cast<uint64_t>(h.compressed_page_size);
  }
  if (ChunkLevels() != num_values_) {
    return common::InvalidArgument("the column chunk holds " + std::to_string(ChunkLevels()) +
                                   " values, its metadata says " + std::to_string(num_values_));
  }
  return Status::Ok();
}

Status ChunkDecoder::Page(const PageHeader& h, const uint8_t* body) {
  if (static_cast<uint64_t>(h.uncompressed_page_size) > options_.max_page_bytes ||
      static_cast<uint64_t>(h.compressed_page_size) > options_.max_page_bytes) {
    return Exhausted("page of " + std::to_string(h.uncompressed_page_size) +
                     " bytes is larger than the " + std::to_string(options_.max_page_bytes) +
                     " allowed");
  }
  switch (h.type) {
    case static_cast<int32_t>(PageType::kDictionaryPage):
      if (!h.dictionary_page) return common::InvalidArgument("dictionary page without its header");
      return DictionaryPage(h, body);
    case static_cast<int32_t>(PageType::kDataPage):
      if (!h.data_page) return common::InvalidArgument("data page without its header");
      return DataPageV1(h, body);
    case static_cast<int32_t>(PageType::kDataPageV2):
      if (!h.data_page_v2) return common::InvalidArgument("data page v2 without its header");
      return DataPageV2(h, body);
    default:
      return Status::Ok();  // index pages and page types from the future carry no values
  }
}

Status ChunkDecoder::DictionaryPage(const PageHeader& h, const uint8_t* body) {
  if (dictionary_ || seen_data_page_) {
    return common::InvalidArgument("a dictionary page that is not the chunk's first page");
  }
  const DictionaryPageHeader& d = *h.dictionary_page;
  if (d.encoding != static_cast<int32_t>(Encoding::kPlain) &&
      d.encoding != static_cast<int32_t>(Encoding::kPlainDictionary)) {
    return Unsupported(std::string("dictionary page encoding ") + EncodingName(d.encoding));
  }
  const size_t size = static_cast<size_t>(h.uncompressed_page_size);
  uint8_t* data = page_.Get(size);
  EMBODY_RETURN_IF_ERROR(
      Decompress(codec_, body, static_cast<size_t>(h.compressed_page_size), data, size));
  ColumnValues dict;
  dict.Reset(column_.type, column_.type_length);
  // PLAIN checks the entry count against the page's bytes before it reserves anything.
  EMBODY_RETURN_IF_ERROR(DecodePlain(data, size, d.num_values, &dict));
  dictionary_ = std::move(dict);
  return Status::Ok();
}

}  // namespace column_chunk_internal

using column_chunk_internal::ChunkDecoder;
using common::Status;

Status DecodeColumnChunk(const ByteSource& source, uint64_t start, uint64_t length,
                         const ColumnDescriptor& column, int32_t codec, int64_t num_values,
                         const ReaderOptions& options, ColumnData* out) {
  if (start > source.size() || length > source.size() - start) {
    return common::InvalidArgument("the column chunk lies outside the file");
  }
  ChunkWindow window(source, start, length);
  return ChunkDecoder(column, codec, num_values, options, out).Run(window);
}

void ReserveEntries(const ColumnDescriptor& column, int64_t num_values, uint64_t compressed_bytes,
                    const ReaderOptions& options, ColumnData* out) {
  // A dense column takes at least a bit an entry; more than 64 entries a byte is a count the
  // data probably cannot back (all nulls, long runs), so those grow page by page instead.
  if (num_values <= 0 || static_cast<uint64_t>(num_values) > compressed_bytes * 64) return;
  const uint64_t width =
      static_cast<uint64_t>(std::max(FixedWidth(column.type, column.type_length), 1));
  const uint64_t used = out->values.ByteSize() + out->def_levels.size() + out->rep_levels.size() +
                        8 * out->row_starts.size();
  if (static_cast<uint64_t>(num_values) * (width + 2) + used > options.max_decoded_bytes) return;
  const size_t n = static_cast<size_t>(num_values);
  if (column.max_def > 0) Grow(&out->def_levels, n);
  if (column.max_rep > 1) Grow(&out->rep_levels, n);
  switch (column.type) {
    case PhysicalType::kBoolean:
      Grow(&out->values.bools, n);
      break;
    case PhysicalType::kInt32:
      Grow(&out->values.i32, n);
      break;
    case PhysicalType::kInt64:
      Grow(&out->values.i64, n);
      break;
    case PhysicalType::kFloat:
      Grow(&out->values.f32, n);
      break;
    case PhysicalType::kDouble:
      Grow(&out->values.f64, n);
      break;
    default:
      break;
  }
}

}  // namespace storage::parquet
