// ChunkDecoder: the decoder of one column chunk's pages, shared by the files that implement it
// (column_chunk.cc: the chunk's page walk and dictionary; column_chunk_levels.cc: repetition and
// definition levels; column_chunk_pages.cc: data pages and their values). Not part of the
// parquet/ interface; use column_chunk.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "storage/parquet/chunk_buffers.h"
#include "storage/parquet/column_chunk.h"
#include "storage/parquet/metadata.h"

namespace storage::parquet::column_chunk_internal {

using common::Status;

inline Status Exhausted(const std::string& what) {
  return Status(common::Code::kResourceExhausted, what);
}
inline Status Unsupported(const std::string& what) {
  return Status(common::Code::kUnimplemented, what);
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

}  // namespace storage::parquet::column_chunk_internal
