// A chunk's data pages (v1 and v2): levels and values split out of the page, decompressed, and
// the values decoded in the page's encoding (plain, dictionary, delta, byte stream split).
#include <algorithm>
#include <cstring>
#include <string>

#include "storage/parquet/column_chunk_decoder.h"
#include "storage/parquet/compression.h"
#include "storage/parquet/delta.h"
#include "storage/parquet/encodings.h"
#include "storage/parquet/rle.h"

namespace storage::parquet::column_chunk_internal {

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

}  // namespace storage::parquet::column_chunk_internal
