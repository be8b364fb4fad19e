#include "storage/parquet/reader.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "storage/file.h"

namespace storage::parquet {

namespace {

using common::Status;

constexpr char kMagic[] = "PAR1";
constexpr char kEncryptedMagic[] = "PARE";
constexpr int kMaxSchemaDepth = 250;  // levels are kept in a byte each

class FileSource : public ByteSource {
 public:
  explicit FileSource(std::unique_ptr<RandomAccessFile> file) : file_(std::move(file)) {}
  uint64_t size() const override { return file_->size(); }
  Status Read(uint64_t offset, size_t size, void* out) const override {
    return file_->Read(offset, size, out);
  }

 private:
  std::unique_ptr<RandomAccessFile> file_;
};

Status Malformed(const std::string& what) { return common::InvalidArgument(what); }

}  // namespace

common::Result<std::unique_ptr<ParquetFile>> ParquetFile::Open(const std::string& path,
                                                               const ReaderOptions& options) {
  auto file = RandomAccessFile::Open(path);
  if (!file.ok()) return file.status();
  return FromSource(path, std::make_unique<FileSource>(std::move(*file)), options);
}

common::Result<std::unique_ptr<ParquetFile>> ParquetFile::FromBuffer(std::string name,
                                                                     std::string bytes,
                                                                     const ReaderOptions& options) {
  return FromSource(std::move(name), std::make_unique<MemorySource>(std::move(bytes)), options);
}

common::Result<std::unique_ptr<ParquetFile>> ParquetFile::FromSource(
    std::string name, std::unique_ptr<ByteSource> source, const ReaderOptions& options) {
  std::unique_ptr<ParquetFile> file(new ParquetFile(std::move(name), std::move(source), options));
  Status s = file->ReadFooter();
  if (!s.ok()) return Status(s.code(), file->name_ + ": " + s.message(), s.field());
  return file;
}

Status ParquetFile::ReadFooter() {
  const uint64_t size = source_->size();
  if (size < 12) {
    return Malformed("not a Parquet file: " + std::to_string(size) +
                     " bytes, too short for its magic and footer");
  }
  char head[4];
  uint8_t tail[8];
  EMBODY_RETURN_IF_ERROR(source_->Read(0, 4, head));
  EMBODY_RETURN_IF_ERROR(source_->Read(size - 8, 8, tail));
  if (std::memcmp(tail + 4, kEncryptedMagic, 4) == 0) {
    return Status(common::Code::kUnimplemented, "encrypted Parquet files are not supported");
  }
  if (std::memcmp(head, kMagic, 4) != 0 || std::memcmp(tail + 4, kMagic, 4) != 0) {
    return Malformed("not a Parquet file: no PAR1 magic at its start and end");
  }
  uint32_t length;
  std::memcpy(&length, tail, 4);
  if (length > size - 12) {
    return Malformed("footer length " + std::to_string(length) + " is larger than the file (" +
                     std::to_string(size) + " bytes)");
  }
  if (length > options_.max_metadata_bytes) {
    return Status(common::Code::kResourceExhausted,
                  "footer of " + std::to_string(length) + " bytes is larger than the " +
                      std::to_string(options_.max_metadata_bytes) + " allowed");
  }
  footer_start_ = size - 8 - length;
  std::unique_ptr<uint8_t[]> bytes(new uint8_t[length ? length : 1]);
  EMBODY_RETURN_IF_ERROR(source_->Read(footer_start_, length, bytes.get()));
  EMBODY_RETURN_IF_ERROR(ParseFileMetaData(bytes.get(), length, &metadata_));
  if (metadata_.encrypted) {
    return Status(common::Code::kUnimplemented, "encrypted Parquet files are not supported");
  }
  auto schema = Schema::Build(metadata_.schema,
                              std::min(std::max(options_.max_nesting_depth, 1), kMaxSchemaDepth));
  if (!schema.ok()) return schema.status();
  schema_ = std::move(*schema);
  const size_t columns = schema_.columns().size();
  for (size_t g = 0; g < metadata_.row_groups.size(); ++g) {
    if (metadata_.row_groups[g].columns.size() != columns) {
      return Malformed("row group " + std::to_string(g) + " has " +
                       std::to_string(metadata_.row_groups[g].columns.size()) +
                       " column chunks, the schema " + std::to_string(columns) + " columns");
    }
  }
  return Status::Ok();
}

Status ParquetFile::ColumnError(int column, int row_group, const Status& cause) const {
  std::string path = column >= 0 && static_cast<size_t>(column) < schema_.columns().size()
                         ? schema_.columns()[static_cast<size_t>(column)].DottedPath()
                         : "#" + std::to_string(column);
  std::string where = name_ + ": column '" + path + "'";
  if (row_group >= 0) where += ", row group " + std::to_string(row_group);
  return Status(cause.code(), where + ": " + cause.message(), path);
}

common::Result<ColumnData> ParquetFile::ReadColumn(int column, int row_group) const {
  ColumnData out;
  Status s = ReadChunk(column, row_group, &out);
  if (!s.ok()) return ColumnError(column, row_group, s);
  return out;
}

Status ParquetFile::ReadColumnInto(int column, int row_group, ColumnData* out) const {
  Status s = ReadChunk(column, row_group, out);
  if (!s.ok()) return ColumnError(column, row_group, s);
  return Status::Ok();
}

common::Result<ColumnData> ParquetFile::ReadColumn(const std::string& name, int row_group) const {
  auto column = schema_.FindColumn(name);
  if (!column.ok()) {
    return Status(column.status().code(), name_ + ": " + column.status().message(), name);
  }
  return ReadColumn(*column, row_group);
}

Status ParquetFile::ReadChunk(int column, int row_group, ColumnData* out) const {
  if (column < 0 || static_cast<size_t>(column) >= schema_.columns().size()) {
    return common::InvalidArgument("no such column");
  }
  if (row_group < 0 || row_group >= num_row_groups()) {
    return common::InvalidArgument("no row group " + std::to_string(row_group) + " (the file has " +
                                   std::to_string(num_row_groups()) + ")");
  }
  const ColumnDescriptor& desc = schema_.columns()[static_cast<size_t>(column)];
  const ColumnChunk& chunk =
      metadata_.row_groups[static_cast<size_t>(row_group)].columns[static_cast<size_t>(column)];
  if (chunk.encrypted) {
    return Status(common::Code::kUnimplemented, "encrypted columns are not supported");
  }
  if (chunk.file_path) {
    return Status(common::Code::kUnimplemented,
                  "the chunk is stored in another file ('" + *chunk.file_path + "')");
  }
  if (!chunk.meta_data) return Malformed("the column chunk has no meta data");
  const ColumnMetaData& md = *chunk.meta_data;
  if (md.type != desc.type) {
    return Malformed(std::string("the chunk's type ") + PhysicalTypeName(md.type) +
                     " differs from the schema's " + PhysicalTypeName(desc.type));
  }
  if (md.path_in_schema != desc.path) {
    std::string path;
    for (const std::string& p : md.path_in_schema) path += (path.empty() ? "" : ".") + p;
    return Malformed("the chunk's path '" + path + "' differs from the schema's");
  }
  uint64_t start = static_cast<uint64_t>(md.data_page_offset);
  // A dictionary page comes first when there is one. Some writers store 0 for "none".
  if (md.dictionary_page_offset && *md.dictionary_page_offset > 0 &&
      static_cast<uint64_t>(*md.dictionary_page_offset) < start) {
    start = static_cast<uint64_t>(*md.dictionary_page_offset);
  }
  const uint64_t length = static_cast<uint64_t>(md.total_compressed_size);
  if (start < 4 || start > footer_start_ || length > footer_start_ - start) {
    return Malformed("the chunk's bytes [" + std::to_string(start) + ", +" +
                     std::to_string(length) + ") lie outside the file's data (4 to " +
                     std::to_string(footer_start_) + ")");
  }
  if (length > options_.max_column_chunk_bytes) {
    return Status(common::Code::kResourceExhausted,
                  "the chunk's " + std::to_string(length) + " bytes are more than the " +
                      std::to_string(options_.max_column_chunk_bytes) + " allowed");
  }
  return DecodeColumnChunk(*source_, start, length, desc, md.codec, md.num_values, options_, out);
}

}  // namespace storage::parquet
