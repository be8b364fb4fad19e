// A data page's repetition and definition levels: decoded, checked against the column's maximum,
// kept implicit while every entry is at the maximum definition level, and counted against the
// decoded-bytes bound.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "storage/parquet/column_chunk_decoder.h"
#include "storage/parquet/encodings.h"
#include "storage/parquet/rle.h"

namespace storage::parquet::column_chunk_internal {

namespace {


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

}  // namespace

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

}  // namespace storage::parquet::column_chunk_internal
