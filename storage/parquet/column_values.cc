#include "storage/parquet/column_values.h"

namespace storage::parquet {

void ColumnValues::Reset(PhysicalType t, int32_t length) {
  type = t;
  type_length = length;
  bools.clear();
  i32.clear();
  i64.clear();
  f32.clear();
  f64.clear();
  bytes.clear();
  offsets.assign(1, 0);
}

int64_t ColumnValues::size() const {
  switch (type) {
    case PhysicalType::kBoolean:
      return static_cast<int64_t>(bools.size());
    case PhysicalType::kInt32:
      return static_cast<int64_t>(i32.size());
    case PhysicalType::kInt64:
      return static_cast<int64_t>(i64.size());
    case PhysicalType::kFloat:
      return static_cast<int64_t>(f32.size());
    case PhysicalType::kDouble:
      return static_cast<int64_t>(f64.size());
    case PhysicalType::kInt96:
    case PhysicalType::kByteArray:
    case PhysicalType::kFixedLenByteArray:
      return static_cast<int64_t>(offsets.size()) - 1;
  }
  return 0;
}

void ColumnValues::AppendFrom(const ColumnValues& src, int64_t i) {
  switch (type) {
    case PhysicalType::kBoolean:
      bools.push_back(src.bools[i]);
      return;
    case PhysicalType::kInt32:
      i32.push_back(src.i32[i]);
      return;
    case PhysicalType::kInt64:
      i64.push_back(src.i64[i]);
      return;
    case PhysicalType::kFloat:
      f32.push_back(src.f32[i]);
      return;
    case PhysicalType::kDouble:
      f64.push_back(src.f64[i]);
      return;
    case PhysicalType::kInt96:
    case PhysicalType::kByteArray:
    case PhysicalType::kFixedLenByteArray:
      bytes.append(src.View(i));
      offsets.push_back(static_cast<int64_t>(bytes.size()));
      return;
  }
}

void ColumnValues::AppendDefault() {
  switch (type) {
    case PhysicalType::kBoolean:
      bools.push_back(0);
      return;
    case PhysicalType::kInt32:
      i32.push_back(0);
      return;
    case PhysicalType::kInt64:
      i64.push_back(0);
      return;
    case PhysicalType::kFloat:
      f32.push_back(0);
      return;
    case PhysicalType::kDouble:
      f64.push_back(0);
      return;
    case PhysicalType::kInt96:
    case PhysicalType::kByteArray:
    case PhysicalType::kFixedLenByteArray:
      offsets.push_back(offsets.back());
      return;
  }
}

uint64_t ColumnValues::ByteSize() const {
  return bools.size() + 4 * i32.size() + 8 * i64.size() + 4 * f32.size() + 8 * f64.size() +
         bytes.size() + 8 * offsets.size();
}

int FixedWidth(PhysicalType type, int32_t type_length) {
  switch (type) {
    case PhysicalType::kInt32:
    case PhysicalType::kFloat:
      return 4;
    case PhysicalType::kInt64:
    case PhysicalType::kDouble:
      return 8;
    case PhysicalType::kInt96:
      return 12;
    case PhysicalType::kFixedLenByteArray:
      return type_length;
    case PhysicalType::kBoolean:
    case PhysicalType::kByteArray:
      return 0;
  }
  return 0;
}

}  // namespace storage::parquet
