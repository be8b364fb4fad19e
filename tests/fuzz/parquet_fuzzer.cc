// libFuzzer target: the Parquet reader (storage/parquet/) on arbitrary file bytes: the footer,
// the schema, every column chunk of every row group, and the assembly into rows.
//
// Properties: no crash, no sanitizer report, and no allocation past the (small) bounds given to
// the reader; a refusal always says what is wrong; a column that reads has consistent shapes
// (offsets start at 0, never decrease and end at the next level's size; validity vectors are
// empty or one per entry).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "storage/parquet/assemble.h"
#include "storage/parquet/columns.h"
#include "storage/parquet/reader.h"

namespace {

using storage::parquet::NestedColumn;

void Fail(const char* what) {
  std::fprintf(stderr, "broken property: %s\n", what);
  std::abort();
}

void CheckShape(const NestedColumn& n) {
  if (n.num_rows < 0) Fail("negative row count");
  int64_t entries = n.num_rows;
  for (const auto& level : n.lists) {
    if (static_cast<int64_t>(level.offsets.size()) != entries + 1) Fail("offsets size");
    if (level.offsets.front() != 0) Fail("offsets do not start at 0");
    for (size_t i = 1; i < level.offsets.size(); ++i) {
      if (level.offsets[i] < level.offsets[i - 1]) Fail("offsets decrease");
    }
    if (!level.valid.empty() && static_cast<int64_t>(level.valid.size()) != entries) {
      Fail("list validity size");
    }
    entries = level.offsets.back();
  }
  if (n.values.size() != entries) Fail("leaf values differ from the innermost offsets");
  if (!n.valid.empty() && static_cast<int64_t>(n.valid.size()) != entries) Fail("leaf validity");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  storage::parquet::ReaderOptions options;
  options.max_metadata_bytes = 1 << 20;
  options.max_page_bytes = 4 << 20;
  options.max_column_values = 1 << 20;
  options.max_decoded_bytes = 32 << 20;
  auto file = storage::parquet::ParquetFile::FromBuffer(
      "fuzz.parquet", std::string(reinterpret_cast<const char*>(data), size), options);
  if (!file.ok()) {
    if (file.status().message().empty()) Fail("an empty error message");
    return 0;
  }
  const auto& f = **file;
  (void)f.schema().ToString();
  // Bounded work per input: inputs are small, but a footer can list many tiny row groups.
  const int groups = f.num_row_groups() < 64 ? f.num_row_groups() : 64;
  for (const auto& column : f.schema().columns()) {
    for (int g = 0; g < groups; ++g) {
      auto chunk = f.ReadColumn(column.index, g);
      if (!chunk.ok()) {
        if (chunk.status().message().empty()) Fail("an empty error message");
        continue;
      }
      if (chunk->num_levels < 0) Fail("negative level count");
      NestedColumn rows;
      common::Status s = storage::parquet::Assemble(std::move(*chunk), column, &rows);
      if (!s.ok()) {
        if (s.message().empty()) Fail("an empty error message");
        continue;
      }
      // A row group's num_rows is a claim the chunk need not match, so it is not compared.
      CheckShape(rows);
    }
  }
  // All row groups appended into one read (ReadColumnInto), as the typed readers do.
  if (f.num_row_groups() <= 64) {
    for (const auto& column : f.schema().columns()) {
      auto rows = storage::parquet::ReadNestedColumn(f, column.DottedPath());
      if (!rows.ok()) {
        if (rows.status().message().empty()) Fail("an empty error message");
        continue;
      }
      CheckShape(*rows);
    }
  }
  return 0;
}
