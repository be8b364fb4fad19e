// A Parquet file opened for reading: the footer parsed and checked, the schema as a tree, and
// column chunks decoded on request, one (column, row group) at a time, their pages read a few
// MiB at a time. Reads go through RandomAccessFile (pread), so a ParquetFile is safe to read
// from many threads at once: every ReadColumn has its own buffers.
//
// Not supported (a clear kUnimplemented error, naming the file): encrypted files, column chunks
// stored in other files, the LZO / LZ4 / LZ4_RAW / BROTLI codecs, the ALP encoding. Everything
// else a file states is bounded by ReaderOptions before it is allocated.
//
// Errors name the file, and for column reads the column's path and the row group (and, inside,
// the page): "data/chunk-000/file-000.parquet: column 'action.list.element', row group 2:
// page 5 (byte 81234 of the chunk): SNAPPY page: corrupt Snappy data". The column's dotted path
// is also the Status field.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "storage/parquet/byte_source.h"
#include "storage/parquet/column_chunk.h"
#include "storage/parquet/metadata.h"
#include "storage/parquet/options.h"
#include "storage/parquet/schema.h"

namespace storage::parquet {

class ParquetFile {
 public:
  static common::Result<std::unique_ptr<ParquetFile>> Open(const std::string& path,
                                                           const ReaderOptions& options = {});
  // Bytes in memory; `name` stands for the file in messages.
  static common::Result<std::unique_ptr<ParquetFile>> FromBuffer(std::string name,
                                                                 std::string bytes,
                                                                 const ReaderOptions& options = {});
  static common::Result<std::unique_ptr<ParquetFile>> FromSource(std::string name,
                                                                 std::unique_ptr<ByteSource> source,
                                                                 const ReaderOptions& options);

  const std::string& name() const { return name_; }
  const FileMetaData& metadata() const { return metadata_; }
  const Schema& schema() const { return schema_; }
  const ReaderOptions& options() const { return options_; }
  int num_row_groups() const { return static_cast<int>(metadata_.row_groups.size()); }
  int64_t num_rows() const { return metadata_.num_rows; }
  int64_t row_group_rows(int row_group) const {
    return metadata_.row_groups[static_cast<size_t>(row_group)].num_rows;
  }

  // One column chunk decoded: levels and the non-null values (column_chunk.h). `column` is the
  // leaf index (Schema::columns()).
  common::Result<ColumnData> ReadColumn(int column, int row_group) const;
  // By name, as Schema::FindColumn resolves it ("observation.state" finds its list's element).
  common::Result<ColumnData> ReadColumn(const std::string& name, int row_group) const;
  // Appends the chunk of `row_group` to `out` (empty, or earlier row groups of this column):
  // reading a column's row groups in order into one ColumnData gives the whole column without
  // copying values from one row group's arrays to another's.
  common::Status ReadColumnInto(int column, int row_group, ColumnData* out) const;

  // An error about `column` (and `row_group`, when not negative) in the form described above.
  common::Status ColumnError(int column, int row_group, const common::Status& cause) const;

 private:
  ParquetFile(std::string name, std::unique_ptr<ByteSource> source, const ReaderOptions& options)
      : name_(std::move(name)), source_(std::move(source)), options_(options) {}
  common::Status ReadFooter();
  common::Status ReadChunk(int column, int row_group, ColumnData* out) const;

  std::string name_;
  std::unique_ptr<ByteSource> source_;
  ReaderOptions options_;
  FileMetaData metadata_;
  Schema schema_;
  uint64_t footer_start_ = 0;  // where the metadata begins: column chunks end before it
};

}  // namespace storage::parquet
