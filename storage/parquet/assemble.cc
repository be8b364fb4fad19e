#include "storage/parquet/assemble.h"

#include <algorithm>
#include <string>
#include <utility>

namespace storage::parquet {

namespace {

using common::Status;

// Spreads the packed non-null values over the leaf slots, nulls becoming defaults.
void SpreadValues(ColumnValues&& packed, const std::vector<uint8_t>& valid, ColumnValues* out) {
  out->Reset(packed.type, packed.type_length);
  int64_t next = 0;
  for (uint8_t v : valid) {
    if (v) {
      out->AppendFrom(packed, next++);
    } else {
      out->AppendDefault();
    }
  }
}

// Row starts (ColumnData::row_starts) ascend from 0 and stay below the entry count.
Status CheckRowStarts(const std::vector<int64_t>& starts, int64_t n) {
  if (n > 0 && (starts.empty() || starts[0] != 0)) {
    return common::InvalidArgument("the first entry does not start a row");
  }
  for (size_t i = 1; i < starts.size(); ++i) {
    if (starts[i] <= starts[i - 1]) return common::InvalidArgument("row starts do not ascend");
  }
  if (!starts.empty() && starts.back() >= n) {
    return common::InvalidArgument("a row starts past the last entry");
  }
  return Status::Ok();
}

// Whether every level equals `level`; an OR of differences, so that it vectorizes.
bool AllEqual(const std::vector<uint8_t>& levels, int level) {
  uint8_t diff = 0;
  for (uint8_t l : levels) diff |= static_cast<uint8_t>(l ^ level);
  return diff == 0;
}

}  // namespace

int64_t NestedColumn::FixedListLength() const {
  if (lists.empty()) return -1;
  const std::vector<int64_t>& o = lists.back().offsets;
  if (o.size() < 2) return -1;
  const int64_t length = o[1] - o[0];
  for (size_t i = 2; i < o.size(); ++i) {
    if (o[i] - o[i - 1] != length) return -1;
  }
  return length;
}

Status Assemble(ColumnData&& data, const ColumnDescriptor& column, NestedColumn* out) {
  const int64_t n = data.num_levels;
  const int R = column.max_rep;
  const int max_def = column.max_def;
  *out = NestedColumn();
  const int64_t packed = data.values.size();
  // Empty definition levels with max_def > 0 stand for all at max_def (column_chunk.h).
  const bool defs_all_max = max_def > 0 && data.def_levels.empty();
  if ((max_def > 0 && !defs_all_max && static_cast<int64_t>(data.def_levels.size()) != n) ||
      (defs_all_max && packed != n) ||
      (R > 1 && static_cast<int64_t>(data.rep_levels.size()) != n) ||
      static_cast<int>(column.repeated_def.size()) != R || packed > n ||
      (max_def == 0 && packed != n)) {
    return common::InvalidArgument("levels and values do not match the column's shape");
  }
  if (R == 1) EMBODY_RETURN_IF_ERROR(CheckRowStarts(data.row_starts, n));
  if (R > 1 && n > 0 && data.rep_levels[0] != 0) {
    return common::InvalidArgument("the first entry does not start a row");
  }

  // Values for every entry means every entry is at the maximum definition level; levels that
  // say otherwise contradict the values.
  if (packed == n && max_def > 0 && !defs_all_max && !AllEqual(data.def_levels, max_def)) {
    return common::InvalidArgument("levels place fewer values than the pages hold");
  }
  if (R == 0) {
    out->num_rows = n;
    if (packed == n) {
      out->values = std::move(data.values);
      return Status::Ok();
    }
    out->valid.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out->valid[i] = data.def_levels[i] == max_def;
    SpreadValues(std::move(data.values), out->valid, &out->values);
    return Status::Ok();
  }

  if (R == 1 && packed == n) {
    // No nulls and no empty lists anywhere: every entry is an element, and the row starts are
    // the offsets.
    ListLevel& level = out->lists.emplace_back();
    level.offsets = std::move(data.row_starts);
    level.offsets.push_back(n);
    out->num_rows = static_cast<int64_t>(level.offsets.size()) - 1;
    out->values = std::move(data.values);
    return Status::Ok();
  }

  const std::vector<int>& elem_def = column.repeated_def;  // element of level j present
  out->lists.resize(static_cast<size_t>(R));
  std::vector<int64_t> count(static_cast<size_t>(R), 0);
  std::vector<uint8_t> list_valid_any(static_cast<size_t>(R), 1);
  std::vector<std::vector<uint8_t>> list_valid(static_cast<size_t>(R));
  std::vector<uint8_t> leaf_valid;
  leaf_valid.reserve(static_cast<size_t>(packed));
  bool any_null_leaf = false;
  const uint8_t* def = max_def > 0 && !defs_all_max ? data.def_levels.data() : nullptr;
  const uint8_t* rep = R > 1 ? data.rep_levels.data() : nullptr;
  size_t next_start = 0;  // R == 1: the next row start not yet reached
  for (int64_t i = 0; i < n; ++i) {
    int r;
    if (rep) {
      r = rep[i];
    } else if (next_start < data.row_starts.size() && data.row_starts[next_start] == i) {
      r = 0;
      ++next_start;
    } else {
      r = 1;
    }
    const int d = def ? def[i] : max_def;
    if (r > R || d > max_def) return common::InvalidArgument("a level above the column's maximum");
    int j = r;
    if (r > 0) {
      if (d < elem_def[static_cast<size_t>(r - 1)]) {
        return common::InvalidArgument(
            "entry " + std::to_string(i) + " continues a list at repetition level " +
            std::to_string(r) + " but has no element there (definition level " + std::to_string(d) +
            ")");
      }
      ++count[static_cast<size_t>(r - 1)];
    }
    bool leaf = true;
    for (; j < R; ++j) {
      // A list at level j exists only where its parent element does.
      const int parent_def = j == 0 ? 0 : elem_def[static_cast<size_t>(j - 1)];
      if (d < parent_def) {
        leaf = false;
        break;
      }
      ListLevel& level = out->lists[static_cast<size_t>(j)];
      level.offsets.push_back(count[static_cast<size_t>(j)]);
      const bool non_null = d >= elem_def[static_cast<size_t>(j)] - 1;
      list_valid[static_cast<size_t>(j)].push_back(non_null);
      if (!non_null) list_valid_any[static_cast<size_t>(j)] = 0;
      if (d < elem_def[static_cast<size_t>(j)]) {  // empty or null list: nothing below
        leaf = false;
        break;
      }
      ++count[static_cast<size_t>(j)];
    }
    if (leaf) {
      const bool present = d == max_def;
      leaf_valid.push_back(present);
      any_null_leaf |= !present;
    }
  }
  // The offsets pushed above are each list's start; drop the initial {0} and close the last.
  for (int j = 0; j < R; ++j) {
    ListLevel& level = out->lists[static_cast<size_t>(j)];
    level.offsets.erase(level.offsets.begin());
    level.offsets.push_back(count[static_cast<size_t>(j)]);
    if (!list_valid_any[static_cast<size_t>(j)]) {
      level.valid = std::move(list_valid[static_cast<size_t>(j)]);
    }
  }
  out->num_rows = static_cast<int64_t>(out->lists[0].offsets.size()) - 1;
  const int64_t present =
      static_cast<int64_t>(std::count(leaf_valid.begin(), leaf_valid.end(), uint8_t{1}));
  if (present != packed) {
    return common::InvalidArgument("levels place " + std::to_string(present) +
                                   " values, the pages hold " + std::to_string(packed));
  }
  if (!any_null_leaf) {
    out->values = std::move(data.values);
  } else {
    SpreadValues(std::move(data.values), leaf_valid, &out->values);
    out->valid = std::move(leaf_valid);
  }
  return Status::Ok();
}

namespace {

// Appends validity `src` (empty: all valid, `src_n` entries) to `dst` (empty: all valid, `dst_n`
// entries), materialising either side when the other has nulls.
void AppendValid(std::vector<uint8_t>&& src, int64_t src_n, std::vector<uint8_t>* dst,
                 int64_t dst_n) {
  if (src.empty() && dst->empty()) return;
  if (dst->empty()) dst->assign(static_cast<size_t>(dst_n), 1);
  if (src.empty()) {
    dst->insert(dst->end(), static_cast<size_t>(src_n), 1);
  } else {
    dst->insert(dst->end(), src.begin(), src.end());
  }
}

void AppendValues(ColumnValues&& src, ColumnValues* dst) {
  auto append = [](auto& s, auto& d) { d.insert(d.end(), s.begin(), s.end()); };
  switch (dst->type) {
    case PhysicalType::kBoolean:
      append(src.bools, dst->bools);
      return;
    case PhysicalType::kInt32:
      append(src.i32, dst->i32);
      return;
    case PhysicalType::kInt64:
      append(src.i64, dst->i64);
      return;
    case PhysicalType::kFloat:
      append(src.f32, dst->f32);
      return;
    case PhysicalType::kDouble:
      append(src.f64, dst->f64);
      return;
    default: {
      const int64_t base = dst->offsets.back();
      dst->bytes += src.bytes;
      for (size_t i = 1; i < src.offsets.size(); ++i) dst->offsets.push_back(base + src.offsets[i]);
    }
  }
}

}  // namespace

void AppendRows(NestedColumn&& src, NestedColumn* dst) {
  if (dst->num_rows == 0 && dst->lists.empty() && dst->values.size() == 0) {
    *dst = std::move(src);
    return;
  }
  for (size_t j = 0; j < dst->lists.size() && j < src.lists.size(); ++j) {
    ListLevel& d = dst->lists[j];
    ListLevel& s = src.lists[j];
    const int64_t dst_lists = static_cast<int64_t>(d.offsets.size()) - 1;
    const int64_t src_lists = static_cast<int64_t>(s.offsets.size()) - 1;
    AppendValid(std::move(s.valid), src_lists, &d.valid, dst_lists);
    const int64_t base = d.offsets.back();
    for (size_t i = 1; i < s.offsets.size(); ++i) d.offsets.push_back(base + s.offsets[i]);
  }
  const int64_t dst_slots = dst->values.size();
  const int64_t src_slots = src.values.size();
  AppendValid(std::move(src.valid), src_slots, &dst->valid, dst_slots);
  AppendValues(std::move(src.values), &dst->values);
  dst->num_rows += src.num_rows;
}

}  // namespace storage::parquet
