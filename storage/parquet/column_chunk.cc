#include "storage/parquet/column_chunk.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include "storage/parquet/chunk_buffers.h"
#include "storage/parquet/compression.h"
#include "storage/parquet/delta.h"
#include "storage/parquet/encodings.h"
#include "storage/parquet/metadata.h"
#include "storage/parquet/rle.h"

namespace storage::parquet {

namespace {

using common::Status;

Status Exhausted(const std::string& what) { return Status(common::Code::kResourceExhausted, what); }
Status Unsupported(const std::string& what) { return Status(common::Code::kUnimplemented, what); }

// A level above the column's maximum fits the bit width but is malformed. A reduction (not
// max_element) so that the compiler vectorizes it.
Status CheckLevels(const uint8_t* levels, int64_t n, int max_level) {
  uint8_t top = 0;
  for (int64_t i = 0; i < n; ++i) top = std::max(top, levels[i]);
  if (top > max_level) {
    return common::InvalidArgument("a level of " + std::to_string(top) +
                                   " above the column's maximum of " + std::to_string(max_level));
  }
  return Status::Ok();
}

class ChunkDecoder {
 public:
  ChunkDecoder(const ColumnDescriptor& column, int32_t codec, int64_t num_values,
               const ReaderOptions& options, ColumnData* out)
      : column_(column), codec_(codec), num_values_(num_values), options_(options), out_(out) {}

  Status Run(ChunkWindow& chunk);

 private:
  // Parses the page header at `pos`, reading more of the chunk while a header could be longer
  // than what was looked at (statistics can make them kilobytes).
  Status Header(ChunkWindow& chunk, uint64_t pos, PageHeader* h, size_t* header_size);
  Status Page(const PageHeader& h, const uint8_t* body);
  Status DictionaryPage(const PageHeader& h, const uint8_t* body);
  Status DataPageV1(const PageHeader& h, const uint8_t* body);
  Status DataPageV2(const PageHeader& h, const uint8_t* body);
  // Decodes `n` levels of `max_level` in a v1 page's `encoding`; `*used` is the bytes taken.
  Status LevelsV1(int32_t encoding, const uint8_t* data, size_t size, int64_t n, int max_level,
                  std::vector<uint8_t>* levels, size_t* used);
  // Appends `n` levels of RLE/bit-packed data (no length prefix) and checks them.
  Status Levels(const uint8_t* data, size_t size, int64_t n, int max_level,
                std::vector<uint8_t>* levels);
  // A page's repetition levels of one level of lists (RLE/bit-packed, no length prefix) as row
  // starts (ColumnData::row_starts).
  Status RowStarts(const uint8_t* data, size_t size, int64_t n);
  // A page's definition levels (RLE/bit-packed, no length prefix). While every page has all
  // its entries at the maximum level, they stay implicit (ColumnData::def_levels empty).
  Status DefLevels(const uint8_t* data, size_t size, int64_t n);
  // Writes out the implicit definition levels of the entries so far.
  void MaterializeDefLevels();
  // Checks a page's entry count against the chunk's and the decoded-bytes bound, before its
  // levels are allocated.
  Status CheckEntries(int64_t n) const;
  // Checks the page's levels, counts its non-null values and reserves room for them.
  Status BeginPage(int64_t n, int64_t* non_null);
  Status Values(int32_t encoding, const uint8_t* data, size_t size, int64_t count);
  // Decompresses `count` plain values of a fixed-width number type straight onto the end of
  // the output (whose size the caller has checked against the uncompressed size).
  Status DecompressInto(const uint8_t* compressed, size_t size, int64_t count);
  uint64_t BytesLeft() const;
  int64_t ChunkLevels() const { return out_->num_levels - start_levels_; }

  const ColumnDescriptor& column_;
  const int32_t codec_;
  const int64_t num_values_;
  const ReaderOptions& options_;
  ColumnData* out_;
  std::optional<ColumnValues> dictionary_;
  bool seen_data_page_ = false;
  int64_t start_levels_ = 0;    // levels in `out_` from earlier chunks
  bool defs_implicit_ = false;  // every entry so far is at max_def; def_levels not kept
  bool page_all_max_ = false;   // this page's entries are all at max_def
  Scratch page_, indices_, level_step_;
};

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

Status ChunkDecoder::Levels(const uint8_t* data, size_t size, int64_t n, int max_level,
                            std::vector<uint8_t>* levels) {
  const size_t old = levels->size();
  RleBitPackedDecoder decoder(data, size, BitWidth(static_cast<uint64_t>(max_level)));
  // In steps through a small buffer, so that a count the data does not hold fails before it is
  // all allocated, and the output is written once (a resize would zero it first).
  constexpr int64_t kStep = int64_t{1} << 16;
  uint8_t* step_buffer = level_step_.Get(static_cast<size_t>(std::min(kStep, n)));
  for (int64_t done = 0; done < n;) {
    const int64_t step = std::min(kStep, n - done);
    EMBODY_RETURN_IF_ERROR(decoder.Decode(step_buffer, step));
    levels->insert(levels->end(), step_buffer, step_buffer + step);
    done += step;
  }
  return CheckLevels(levels->data() + old, n, max_level);
}

Status ChunkDecoder::LevelsV1(int32_t encoding, const uint8_t* data, size_t size, int64_t n,
                              int max_level, std::vector<uint8_t>* levels, size_t* used) {
  if (encoding == static_cast<int32_t>(Encoding::kRle)) {
    if (size < 4) return common::InvalidArgument("levels: no length prefix");
    uint32_t length;
    std::memcpy(&length, data, 4);
    if (length > size - 4) {
      return common::InvalidArgument("levels of " + std::to_string(length) +
                                     " bytes run past the page's end");
    }
    *used = 4 + length;
    return Levels(data + 4, length, n, max_level, levels);
  }
  if (encoding == static_cast<int32_t>(Encoding::kBitPacked)) {
    const int bw = BitWidth(static_cast<uint64_t>(max_level));
    *used = static_cast<size_t>(PackedBytes(static_cast<uint64_t>(n), bw));
    const size_t old = levels->size();
    levels->resize(old + static_cast<size_t>(n));
    EMBODY_RETURN_IF_ERROR(DecodeBitPackedMsbFirst(data, size, bw, n, levels->data() + old));
    return CheckLevels(levels->data() + old, n, max_level);
  }
  return Unsupported(std::string("level encoding ") + EncodingName(encoding));
}

Status ChunkDecoder::CheckEntries(int64_t n) const {
  if (n > num_values_ - ChunkLevels()) {
    return common::InvalidArgument("page of " + std::to_string(n) + " values passes the chunk's " +
                                   std::to_string(num_values_));
  }
  const uint64_t level_bytes =
      static_cast<uint64_t>(n) * ((column_.max_def > 0 ? 1 : 0) + (column_.max_rep > 1 ? 1 : 0));
  if (level_bytes > BytesLeft()) {
    return Exhausted("the column's levels pass the " + std::to_string(options_.max_decoded_bytes) +
                     " bytes allowed");
  }
  return Status::Ok();
}

Status ChunkDecoder::RowStarts(const uint8_t* data, size_t size, int64_t n) {
  RleBitPackedDecoder decoder(data, size, 1);
  // Eight bytes a row start, counted against the decoded-bytes bound as they are found (a run
  // of zeros can claim a billion rows in six bytes).
  return decoder.DecodeZeroPositions(n, out_->num_levels, static_cast<int64_t>(BytesLeft() / 8),
                                     &out_->row_starts);
}

void ChunkDecoder::MaterializeDefLevels() {
  if (!defs_implicit_) return;
  out_->def_levels.assign(static_cast<size_t>(out_->num_levels),
                          static_cast<uint8_t>(column_.max_def));
  defs_implicit_ = false;
}

Status ChunkDecoder::DefLevels(const uint8_t* data, size_t size, int64_t n) {
  const int max_def = column_.max_def;
  if (RunsAllEqual(data, size, BitWidth(static_cast<uint64_t>(max_def)), n,
                   static_cast<uint64_t>(max_def))) {
    page_all_max_ = true;
    if (!defs_implicit_) {
      out_->def_levels.insert(out_->def_levels.end(), static_cast<size_t>(n),
                              static_cast<uint8_t>(max_def));
    }
    return Status::Ok();
  }
  MaterializeDefLevels();
  return Levels(data, size, n, max_def, &out_->def_levels);
}

Status ChunkDecoder::BeginPage(int64_t n, int64_t* non_null) {
  const int64_t old = out_->num_levels;
  if (old == start_levels_ && n > 0) {
    const bool starts_row =
        column_.max_rep == 0 ||
        (column_.max_rep == 1
             ? !out_->row_starts.empty() && out_->row_starts.back() >= old &&
                   *std::lower_bound(out_->row_starts.begin(), out_->row_starts.end(), old) == old
             : out_->rep_levels[static_cast<size_t>(old)] == 0);
    if (!starts_row) {
      return common::InvalidArgument("the column chunk does not start a row");
    }
  }
  if (column_.max_def > 0 && !page_all_max_) {
    *non_null = std::count(out_->def_levels.begin() + old, out_->def_levels.end(),
                           static_cast<uint8_t>(column_.max_def));
  } else {
    *non_null = n;
  }
  out_->num_levels += n;
  const uint64_t width = static_cast<uint64_t>(std::max(FixedWidth(column_.type, 0), 1));
  if (static_cast<uint64_t>(*non_null) * width > BytesLeft()) {
    return Exhausted("the column's values pass the " + std::to_string(options_.max_decoded_bytes) +
                     " bytes allowed");
  }
  return Status::Ok();
}

Status ChunkDecoder::DataPageV1(const PageHeader& h, const uint8_t* body) {
  seen_data_page_ = true;
  const DataPageHeader& d = *h.data_page;
  const int64_t n = d.num_values;
  EMBODY_RETURN_IF_ERROR(CheckEntries(n));
  const size_t size = static_cast<size_t>(h.uncompressed_page_size);
  const size_t compressed = static_cast<size_t>(h.compressed_page_size);
  const int width = FixedWidth(column_.type, column_.type_length);

  // A page of plain fixed-width values and no levels decompresses straight into the output.
  if (column_.max_def == 0 && column_.max_rep == 0 &&
      d.encoding == static_cast<int32_t>(Encoding::kPlain) &&
      (column_.type == PhysicalType::kFloat || column_.type == PhysicalType::kDouble ||
       column_.type == PhysicalType::kInt32 || column_.type == PhysicalType::kInt64) &&
      static_cast<uint64_t>(n) * static_cast<uint64_t>(width) == size) {
    int64_t non_null = 0;
    page_all_max_ = false;
    EMBODY_RETURN_IF_ERROR(BeginPage(n, &non_null));
    return DecompressInto(body, compressed, n);
  }

  uint8_t* data = page_.Get(size);
  EMBODY_RETURN_IF_ERROR(Decompress(codec_, body, compressed, data, size));
  size_t pos = 0, used = 0;
  if (column_.max_rep == 1 && d.repetition_level_encoding == static_cast<int32_t>(Encoding::kRle)) {
    uint32_t length = 0;
    if (size < 4) return common::InvalidArgument("levels: no length prefix");
    std::memcpy(&length, data, 4);
    if (length > size - 4) {
      return common::InvalidArgument("levels of " + std::to_string(length) +
                                     " bytes run past the page's end");
    }
    EMBODY_RETURN_IF_ERROR(RowStarts(data + 4, length, n));
    pos += 4 + length;
  } else if (column_.max_rep == 1) {
    // The deprecated BIT_PACKED levels: decoded as bytes, then turned into row starts.
    std::vector<uint8_t> levels;
    EMBODY_RETURN_IF_ERROR(LevelsV1(d.repetition_level_encoding, data, size, n, 1, &levels, &used));
    for (int64_t i = 0; i < n; ++i) {
      if (levels[static_cast<size_t>(i)] == 0) out_->row_starts.push_back(out_->num_levels + i);
    }
    pos += used;
  } else if (column_.max_rep > 0) {
    EMBODY_RETURN_IF_ERROR(LevelsV1(d.repetition_level_encoding, data, size, n, column_.max_rep,
                                    &out_->rep_levels, &used));
    pos += used;
  }
  page_all_max_ = false;
  if (column_.max_def > 0) {
    if (d.definition_level_encoding == static_cast<int32_t>(Encoding::kRle)) {
      uint32_t length = 0;
      if (size - pos < 4) return common::InvalidArgument("levels: no length prefix");
      std::memcpy(&length, data + pos, 4);
      if (length > size - pos - 4) {
        return common::InvalidArgument("levels of " + std::to_string(length) +
                                       " bytes run past the page's end");
      }
      EMBODY_RETURN_IF_ERROR(DefLevels(data + pos + 4, length, n));
      pos += 4 + length;
    } else {
      MaterializeDefLevels();
      EMBODY_RETURN_IF_ERROR(LevelsV1(d.definition_level_encoding, data + pos, size - pos, n,
                                      column_.max_def, &out_->def_levels, &used));
      pos += used;
    }
  }
  int64_t non_null = 0;
  EMBODY_RETURN_IF_ERROR(BeginPage(n, &non_null));
  return Values(d.encoding, data + pos, size - pos, non_null);
}

Status ChunkDecoder::DataPageV2(const PageHeader& h, const uint8_t* body) {
  seen_data_page_ = true;
  const DataPageHeaderV2& d = *h.data_page_v2;
  const int64_t n = d.num_values;
  EMBODY_RETURN_IF_ERROR(CheckEntries(n));
  const uint64_t rep_len = static_cast<uint64_t>(d.repetition_levels_byte_length);
  const uint64_t def_len = static_cast<uint64_t>(d.definition_levels_byte_length);
  const uint64_t compressed = static_cast<uint64_t>(h.compressed_page_size);
  const uint64_t uncompressed = static_cast<uint64_t>(h.uncompressed_page_size);
  if (rep_len + def_len > compressed || rep_len + def_len > uncompressed) {
    return common::InvalidArgument("levels of " + std::to_string(rep_len + def_len) +
                                   " bytes are larger than the page");
  }
  // Levels are never compressed in a v2 page.
  if (column_.max_rep == 1) {
    EMBODY_RETURN_IF_ERROR(RowStarts(body, static_cast<size_t>(rep_len), n));
  } else if (column_.max_rep > 0) {
    EMBODY_RETURN_IF_ERROR(Levels(body, rep_len, n, column_.max_rep, &out_->rep_levels));
  }
  page_all_max_ = false;
  if (column_.max_def > 0) {
    EMBODY_RETURN_IF_ERROR(DefLevels(body + rep_len, static_cast<size_t>(def_len), n));
  }
  int64_t non_null = 0;
  EMBODY_RETURN_IF_ERROR(BeginPage(n, &non_null));
  const uint8_t* section = body + rep_len + def_len;
  const size_t section_size = static_cast<size_t>(compressed - rep_len - def_len);
  const size_t values_size = static_cast<size_t>(uncompressed - rep_len - def_len);
  if (!d.is_compressed || codec_ == 0) {
    if (section_size != values_size) {
      return common::InvalidArgument("an uncompressed value section of " +
                                     std::to_string(section_size) + " bytes, the header says " +
                                     std::to_string(values_size));
    }
    return Values(d.encoding, section, section_size, non_null);
  }
  // Plain fixed-width values decompress straight into the output.
  const int width = FixedWidth(column_.type, column_.type_length);
  if (d.encoding == static_cast<int32_t>(Encoding::kPlain) &&
      (column_.type == PhysicalType::kFloat || column_.type == PhysicalType::kDouble ||
       column_.type == PhysicalType::kInt32 || column_.type == PhysicalType::kInt64) &&
      static_cast<uint64_t>(non_null) * static_cast<uint64_t>(width) == values_size) {
    return DecompressInto(section, section_size, non_null);
  }
  uint8_t* data = page_.Get(values_size);
  EMBODY_RETURN_IF_ERROR(Decompress(codec_, section, section_size, data, values_size));
  return Values(d.encoding, data, values_size, non_null);
}

Status ChunkDecoder::DecompressInto(const uint8_t* compressed, size_t size, int64_t count) {
  ColumnValues& v = out_->values;
  auto direct = [&](auto& vec) -> Status {
    const size_t old = vec.size();
    vec.resize(old + static_cast<size_t>(count));
    Status s = Decompress(codec_, compressed, size, reinterpret_cast<uint8_t*>(vec.data() + old),
                          static_cast<size_t>(count) * sizeof(vec[0]));
    if (!s.ok()) vec.resize(old);
    return s;
  };
  switch (column_.type) {
    case PhysicalType::kFloat:
      return direct(v.f32);
    case PhysicalType::kDouble:
      return direct(v.f64);
    case PhysicalType::kInt32:
      return direct(v.i32);
    case PhysicalType::kInt64:
      return direct(v.i64);
    default:
      return common::Internal("DecompressInto on a column of another type");
  }
}

Status ChunkDecoder::Values(int32_t encoding, const uint8_t* data, size_t size, int64_t count) {
  ColumnValues& v = out_->values;
  const PhysicalType type = column_.type;
  auto wrong_type = [&]() {
    return common::InvalidArgument(std::string(EncodingName(encoding)) + " values in a " +
                                   PhysicalTypeName(type) + " column");
  };
  switch (encoding) {
    case static_cast<int32_t>(Encoding::kPlain):
      return DecodePlain(data, size, count, &v);
    case static_cast<int32_t>(Encoding::kPlainDictionary):
    case static_cast<int32_t>(Encoding::kRleDictionary): {
      if (!dictionary_)
        return common::InvalidArgument("dictionary-encoded page without a dictionary");
      if (count == 0) return Status::Ok();
      if (size < 1) return common::InvalidArgument("dictionary indices without their bit width");
      const int bw = data[0];
      if (bw > 32) {
        return common::InvalidArgument("dictionary index bit width " + std::to_string(bw));
      }
      // In steps, so that the indices take a small buffer and the values grow only as indices
      // are found in the data.
      constexpr int64_t kStep = int64_t{1} << 16;
      uint32_t* indices = reinterpret_cast<uint32_t*>(
          indices_.Get(static_cast<size_t>(std::min(kStep, count)) * sizeof(uint32_t)));
      RleBitPackedDecoder decoder(data + 1, size - 1, bw);
      for (int64_t done = 0; done < count;) {
        const int64_t step = std::min(kStep, count - done);
        EMBODY_RETURN_IF_ERROR(decoder.Decode(indices, step));
        EMBODY_RETURN_IF_ERROR(GatherDictionary(*dictionary_, indices, step, BytesLeft(), &v));
        done += step;
      }
      return Status::Ok();
    }
    case static_cast<int32_t>(Encoding::kRle):
      if (type != PhysicalType::kBoolean) return wrong_type();
      return DecodeRleBooleans(data, size, count, &v);
    case static_cast<int32_t>(Encoding::kDeltaBinaryPacked): {
      if (type == PhysicalType::kInt32) {
        return DecodeDeltaBinaryPacked<int32_t>(data, size, count, &v.i32);
      }
      if (type == PhysicalType::kInt64) {
        return DecodeDeltaBinaryPacked<int64_t>(data, size, count, &v.i64);
      }
      return wrong_type();
    }
    case static_cast<int32_t>(Encoding::kDeltaLengthByteArray):
      if (type != PhysicalType::kByteArray) return wrong_type();
      return DecodeDeltaLengthByteArray(data, size, count, &v);
    case static_cast<int32_t>(Encoding::kDeltaByteArray):
      if (type != PhysicalType::kByteArray && type != PhysicalType::kFixedLenByteArray) {
        return wrong_type();
      }
      return DecodeDeltaByteArray(data, size, count, BytesLeft(), &v);
    case static_cast<int32_t>(Encoding::kByteStreamSplit):
      return DecodeByteStreamSplit(data, size, count, &v);
    default:
      return Unsupported(std::string("value encoding ") + EncodingName(encoding) + " (" +
                         std::to_string(encoding) + ")");
  }
}

}  // namespace

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
