#include "storage/parquet/columns.h"

#include <algorithm>
#include <utility>

namespace storage::parquet {

namespace {

using common::Status;

template <typename T>
const char* TypeName();
template <>
const char* TypeName<bool>() {
  return "bool";
}
template <>
const char* TypeName<int32_t>() {
  return "int32";
}
template <>
const char* TypeName<int64_t>() {
  return "int64";
}
template <>
const char* TypeName<float>() {
  return "float";
}
template <>
const char* TypeName<double>() {
  return "double";
}
template <>
const char* TypeName<std::string>() {
  return "string";
}

template <typename T>
Status NotReadableAs(PhysicalType type) {
  return common::InvalidArgument(std::string("a ") + PhysicalTypeName(type) +
                                 " column cannot be read as " + TypeName<T>());
}

template <typename From, typename To>
void Widen(const std::vector<From>& from, std::vector<To>* to) {
  to->assign(from.begin(), from.end());
}

// Moves (or widens) the values into a vector of T; the types allowed are in columns.h.
template <typename T>
Status TakeValues(ColumnValues&& v, std::vector<T>* out) {
  if constexpr (std::is_same_v<T, float>) {
    if (v.type != PhysicalType::kFloat) return NotReadableAs<T>(v.type);
    *out = std::move(v.f32);
  } else if constexpr (std::is_same_v<T, double>) {
    if (v.type == PhysicalType::kDouble) {
      *out = std::move(v.f64);
    } else if (v.type == PhysicalType::kFloat) {
      Widen(v.f32, out);
    } else {
      return NotReadableAs<T>(v.type);
    }
  } else if constexpr (std::is_same_v<T, int64_t>) {
    if (v.type == PhysicalType::kInt64) {
      *out = std::move(v.i64);
    } else if (v.type == PhysicalType::kInt32) {
      Widen(v.i32, out);
    } else {
      return NotReadableAs<T>(v.type);
    }
  } else if constexpr (std::is_same_v<T, int32_t>) {
    if (v.type != PhysicalType::kInt32) return NotReadableAs<T>(v.type);
    *out = std::move(v.i32);
  } else if constexpr (std::is_same_v<T, bool>) {
    if (v.type != PhysicalType::kBoolean) return NotReadableAs<T>(v.type);
    out->assign(v.bools.begin(), v.bools.end());
  } else {
    static_assert(std::is_same_v<T, std::string>);
    if (v.type != PhysicalType::kByteArray && v.type != PhysicalType::kFixedLenByteArray) {
      return NotReadableAs<T>(v.type);
    }
    const int64_t n = v.size();
    out->clear();
    out->reserve(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out->emplace_back(v.View(i));
  }
  return Status::Ok();
}

// Reads one row group, or all of them as one stream of levels and values, and assembles rows.
Status ReadRows(const ParquetFile& file, int column, int row_group, NestedColumn* out) {
  const ColumnDescriptor& desc = file.schema().columns()[static_cast<size_t>(column)];
  const int first = row_group == kAllRowGroups ? 0 : row_group;
  const int last = row_group == kAllRowGroups ? file.num_row_groups() : row_group + 1;
  ColumnData data;
  data.column = column;
  data.max_def = desc.max_def;
  data.max_rep = desc.max_rep;
  data.values.Reset(desc.type, desc.type_length);
  // One reservation for every row group's entries, so appending them copies nothing.
  int64_t entries = 0;
  uint64_t bytes = 0;
  for (int g = first; g < last; ++g) {
    const auto& chunk =
        file.metadata().row_groups[static_cast<size_t>(g)].columns[static_cast<size_t>(column)];
    if (!chunk.meta_data) continue;
    entries += std::min(chunk.meta_data->num_values, file.options().max_column_values);
    bytes += static_cast<uint64_t>(chunk.meta_data->total_compressed_size);
  }
  ReserveEntries(desc, entries, bytes, file.options(), &data);
  for (int g = first; g < last; ++g) {
    EMBODY_RETURN_IF_ERROR(file.ReadColumnInto(column, g, &data));
  }
  Status s = Assemble(std::move(data), desc, out);
  if (!s.ok()) return file.ColumnError(column, row_group, s);
  return Status::Ok();
}

Status Resolve(const ParquetFile& file, const std::string& name, int row_group, int* column) {
  auto found = file.schema().FindColumn(name);
  if (!found.ok()) {
    return Status(found.status().code(), file.name() + ": " + found.status().message(), name);
  }
  *column = *found;
  if (row_group != kAllRowGroups && (row_group < 0 || row_group >= file.num_row_groups())) {
    return file.ColumnError(
        *column, row_group,
        common::InvalidArgument("the file has " + std::to_string(file.num_row_groups()) +
                                " row groups"));
  }
  return Status::Ok();
}

Status WrongShape(const ParquetFile& file, int column, int want_lists, const char* reader) {
  const int have = file.schema().columns()[static_cast<size_t>(column)].max_rep;
  return file.ColumnError(
      column, -1,
      common::InvalidArgument("the column has " + std::to_string(have) + " levels of lists, not " +
                              std::to_string(want_lists) + " (" + reader + ")"));
}

}  // namespace

template <typename T>
int64_t ListColumn<T>::FixedLength() const {
  if (offsets.size() < 2) return -1;
  const int64_t length = offsets[1] - offsets[0];
  for (size_t i = 2; i < offsets.size(); ++i) {
    if (offsets[i] - offsets[i - 1] != length) return -1;
  }
  return length;
}

template <typename T>
common::Result<FlatColumn<T>> ReadFlatColumn(const ParquetFile& file, const std::string& name,
                                             int row_group) {
  int column = 0;
  EMBODY_RETURN_IF_ERROR(Resolve(file, name, row_group, &column));
  if (file.schema().columns()[static_cast<size_t>(column)].max_rep != 0) {
    return WrongShape(file, column, 0, "ReadFlatColumn");
  }
  NestedColumn rows;
  EMBODY_RETURN_IF_ERROR(ReadRows(file, column, row_group, &rows));
  FlatColumn<T> out;
  Status s = TakeValues(std::move(rows.values), &out.values);
  if (!s.ok()) return file.ColumnError(column, -1, s);
  out.valid = std::move(rows.valid);
  return out;
}

template <typename T>
common::Result<ListColumn<T>> ReadListColumn(const ParquetFile& file, const std::string& name,
                                             int row_group) {
  int column = 0;
  EMBODY_RETURN_IF_ERROR(Resolve(file, name, row_group, &column));
  if (file.schema().columns()[static_cast<size_t>(column)].max_rep != 1) {
    return WrongShape(file, column, 1, "ReadListColumn");
  }
  NestedColumn rows;
  EMBODY_RETURN_IF_ERROR(ReadRows(file, column, row_group, &rows));
  ListColumn<T> out;
  Status s = TakeValues(std::move(rows.values), &out.values);
  if (!s.ok()) return file.ColumnError(column, -1, s);
  out.offsets = std::move(rows.lists[0].offsets);
  out.valid = std::move(rows.lists[0].valid);
  out.value_valid = std::move(rows.valid);
  return out;
}

common::Result<NestedColumn> ReadNestedColumn(const ParquetFile& file, const std::string& name,
                                              int row_group) {
  int column = 0;
  EMBODY_RETURN_IF_ERROR(Resolve(file, name, row_group, &column));
  NestedColumn rows;
  EMBODY_RETURN_IF_ERROR(ReadRows(file, column, row_group, &rows));
  return rows;
}

#define EMBODY_PARQUET_DEFINE(T)                                                                   \
  template struct ListColumn<T>;                                                                   \
  template common::Result<FlatColumn<T>> ReadFlatColumn<T>(const ParquetFile&, const std::string&, \
                                                           int);                                   \
  template common::Result<ListColumn<T>> ReadListColumn<T>(const ParquetFile&, const std::string&, \
                                                           int);
EMBODY_PARQUET_COLUMN_TYPES(EMBODY_PARQUET_DEFINE)
#undef EMBODY_PARQUET_DEFINE

}  // namespace storage::parquet
