#include "engine/data/packing.h"

#include <algorithm>
#include <string>

#include "engine/data/remainder_index.h"

namespace engine::data {
namespace {

common::Status CheckInputs(std::span<const int32_t> lengths, int budget) {
  if (budget < 1) {
    return common::InvalidArgument("row budget must be at least 1, got " + std::to_string(budget),
                                   "budget");
  }
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] < 1 || lengths[i] > budget) {
      return common::InvalidArgument("sample " + std::to_string(i) + " has " +
                                         std::to_string(lengths[i]) + " tokens; packing needs 1.." +
                                         std::to_string(budget) + " (the row budget)",
                                     "lengths[" + std::to_string(i) + "]");
    }
  }
  return common::Status::Ok();
}

// Sample indices grouped by length, longest first; stable within a length. first_of[len] is where
// the samples of that length begin (first_of has budget + 2 entries).
void SortByLengthDescending(std::span<const int32_t> lengths, int budget,
                            std::vector<int32_t>* order, std::vector<int32_t>* first_of) {
  first_of->assign(budget + 2, 0);
  for (int32_t len : lengths) ++(*first_of)[len];
  // Prefix sum from the longest length down.
  int32_t pos = 0;
  for (int len = budget; len >= 0; --len) {
    const int32_t c = (*first_of)[len];
    (*first_of)[len] = pos;
    pos += c;
  }
  (*first_of)[budget + 1] = 0;
  order->resize(lengths.size());
  std::vector<int32_t> cursor(first_of->begin(), first_of->end());
  for (size_t i = 0; i < lengths.size(); ++i)
    (*order)[cursor[lengths[i]]++] = static_cast<int32_t>(i);
}

}  // namespace

double PackedRows::Efficiency() const {
  const int64_t capacity = static_cast<int64_t>(num_rows()) * budget;
  return capacity == 0 ? 1.0 : static_cast<double>(real_tokens) / static_cast<double>(capacity);
}

common::Result<PackedRows> PackBestFitDecreasing(std::span<const int32_t> lengths, int budget) {
  EMBODY_RETURN_IF_ERROR(CheckInputs(lengths, budget));
  std::vector<int32_t> order, first_of;
  SortByLengthDescending(lengths, budget, &order, &first_of);

  // Open rows by remainder: rows_with_room[r] is a stack of rows with exactly r tokens free.
  // Full rows (r = 0) are never looked up again, so they are not tracked.
  std::vector<std::vector<int32_t>> rows_with_room(budget + 1);
  RemainderIndex index(budget);
  std::vector<int32_t> row_of(lengths.size());
  std::vector<int32_t> row_count;  // samples per row
  for (int32_t s : order) {
    const int len = lengths[s];
    const int r = index.FindAtLeast(len);
    int32_t row;
    int left;
    if (r < 0) {
      row = static_cast<int32_t>(row_count.size());
      row_count.push_back(0);
      left = budget - len;
    } else {
      std::vector<int32_t>& bucket = rows_with_room[r];
      row = bucket.back();
      bucket.pop_back();
      if (bucket.empty()) index.Erase(r);
      left = r - len;
    }
    row_of[s] = row;
    ++row_count[row];
    if (left > 0) {
      if (rows_with_room[left].empty()) index.Insert(left);
      rows_with_room[left].push_back(row);
    }
  }

  // Write rows out; within a row, samples keep placement order (longest first).
  PackedRows out;
  out.budget = budget;
  const int num_rows = static_cast<int>(row_count.size());
  out.row_begin.assign(num_rows + 1, 0);
  for (int r = 0; r < num_rows; ++r) out.row_begin[r + 1] = out.row_begin[r] + row_count[r];
  out.sample_index.resize(lengths.size());
  out.cu_seqlens.resize(lengths.size() + num_rows);
  std::vector<int32_t> fill(out.row_begin.begin(), out.row_begin.end() - 1);
  for (int32_t s : order) out.sample_index[fill[row_of[s]]++] = s;
  for (int r = 0; r < num_rows; ++r) {
    int32_t* cu = out.cu_seqlens.data() + out.row_begin[r] + r;
    cu[0] = 0;
    for (int i = out.row_begin[r]; i < out.row_begin[r + 1]; ++i, ++cu) {
      cu[1] = cu[0] + lengths[out.sample_index[i]];
    }
    out.real_tokens += *cu;
  }
  return out;
}

namespace {

// A group of rows with the same contents (as counts per length) and so the same remainder.
// Contents are a path in a tree of placements: node (length, copies, parent) means "copies samples
// of this length, on top of the parent's contents"; splitting a group shares the parent.
struct Placement {
  int32_t length;
  int32_t copies;
  int32_t parent;  // -1: empty row
};
struct RowGroup {
  int32_t rows;
  int32_t contents;  // leaf Placement
};

}  // namespace

common::Result<PackedRows> PackBestFitDecreasingHistogram(std::span<const int32_t> lengths,
                                                          int budget) {
  EMBODY_RETURN_IF_ERROR(CheckInputs(lengths, budget));
  std::vector<int32_t> order, first_of;
  SortByLengthDescending(lengths, budget, &order, &first_of);
  auto count_of = [&](int len) {
    return (len == 1 ? static_cast<int32_t>(lengths.size()) : first_of[len - 1]) - first_of[len];
  };

  std::vector<Placement> placements;
  std::vector<RowGroup> groups;
  std::vector<std::vector<int32_t>> groups_with_room(budget + 1);  // group ids by remainder
  RemainderIndex index(budget);
  auto add_group = [&](int32_t rows, int32_t parent, int len, int copies, int left) {
    placements.push_back({len, copies, parent});
    groups.push_back({rows, static_cast<int32_t>(placements.size()) - 1});
    if (left > 0) {
      if (groups_with_room[left].empty()) index.Insert(left);
      groups_with_room[left].push_back(static_cast<int32_t>(groups.size()) - 1);
    }
  };

  for (int len = budget; len >= 1; --len) {
    int64_t todo = count_of(len);
    while (todo > 0) {
      const int r = index.FindAtLeast(len);
      if (r < 0) {
        // New rows: sequential best fit keeps filling a fresh row while the sample fits,
        // since nothing else has room.
        const int per = budget / len;
        const int64_t full = todo / per;
        const int rest = static_cast<int>(todo % per);
        if (full > 0) add_group(static_cast<int32_t>(full), -1, len, per, budget - per * len);
        if (rest > 0) add_group(1, -1, len, rest, budget - rest * len);
        break;
      }
      // Best fit is remainder r; after taking k samples a row has r - k·len left, which stays the
      // best fit while ≥ len, so each row of the group takes floor(r / len) samples.
      std::vector<int32_t>& bucket = groups_with_room[r];
      const int32_t g = bucket.back();
      const int per = r / len;
      const int64_t full_rows_needed = todo / per;
      if (full_rows_needed >= groups[g].rows) {
        bucket.pop_back();
        if (bucket.empty()) index.Erase(r);
        todo -= static_cast<int64_t>(per) * groups[g].rows;
        const int32_t rows = groups[g].rows;
        const int32_t parent = groups[g].contents;
        groups[g].rows = 0;  // retired; its rows live on in the new group
        add_group(rows, parent, len, per, r - per * len);
        continue;
      }
      const int32_t full = static_cast<int32_t>(full_rows_needed);
      const int rest = static_cast<int>(todo % per);
      const int32_t parent = groups[g].contents;
      groups[g].rows -= full + (rest > 0 ? 1 : 0);
      if (groups[g].rows == 0) {
        groups_with_room[r].pop_back();
        if (groups_with_room[r].empty()) index.Erase(r);
      }
      if (full > 0) add_group(full, parent, len, per, r - per * len);
      if (rest > 0) add_group(1, parent, len, rest, r - rest * len);
      todo = 0;
    }
  }

  // Materialise: each group's rows take sample indices of each length from that length's list.
  PackedRows out;
  out.budget = budget;
  out.row_begin.reserve(lengths.size() / 2 + 2);
  out.sample_index.reserve(lengths.size());
  out.cu_seqlens.reserve(lengths.size() + lengths.size() / 2 + 2);
  std::vector<int32_t> next_of(first_of.begin(), first_of.end());  // cursor into order per length
  std::vector<Placement> path;
  for (const RowGroup& group : groups) {
    if (group.rows == 0) continue;
    path.clear();
    for (int32_t p = group.contents; p >= 0; p = placements[p].parent)
      path.push_back(placements[p]);
    for (int32_t row = 0; row < group.rows; ++row) {
      int32_t tokens = 0;
      out.cu_seqlens.push_back(0);
      for (auto it = path.rbegin(); it != path.rend(); ++it) {  // longest first
        for (int c = 0; c < it->copies; ++c) {
          out.sample_index.push_back(order[next_of[it->length]++]);
          tokens += it->length;
          out.cu_seqlens.push_back(tokens);
        }
      }
      out.real_tokens += tokens;
      out.row_begin.push_back(static_cast<int32_t>(out.sample_index.size()));
    }
  }
  return out;
}

common::Status ValidatePacking(const PackedRows& packed, std::span<const int32_t> lengths) {
  const int num_rows = packed.num_rows();
  if (num_rows < 0 || packed.row_begin.front() != 0 ||
      packed.row_begin.back() != static_cast<int32_t>(packed.sample_index.size()) ||
      packed.sample_index.size() != lengths.size() ||
      packed.cu_seqlens.size() != lengths.size() + num_rows) {
    return common::InvalidArgument("packed rows have inconsistent sizes");
  }
  std::vector<char> seen(lengths.size(), 0);
  int64_t real = 0;
  for (int r = 0; r < num_rows; ++r) {
    if (packed.row_begin[r + 1] < packed.row_begin[r]) {
      return common::InvalidArgument("row " + std::to_string(r) + " has negative size");
    }
    std::span<const int32_t> row = packed.Row(r), cu = packed.CuSeqlens(r);
    if (cu[0] != 0) return common::InvalidArgument("row " + std::to_string(r) + ": cu[0] != 0");
    for (size_t i = 0; i < row.size(); ++i) {
      const int32_t s = row[i];
      if (s < 0 || static_cast<size_t>(s) >= lengths.size() || seen[s]) {
        return common::InvalidArgument("sample " + std::to_string(s) +
                                       " missing, out of range or placed twice");
      }
      seen[s] = 1;
      if (cu[i + 1] - cu[i] != lengths[s]) {
        return common::InvalidArgument("row " + std::to_string(r) + ": cu_seqlens disagree with " +
                                       "the length of sample " + std::to_string(s));
      }
    }
    if (cu.back() > packed.budget) {
      return common::InvalidArgument("row " + std::to_string(r) + " holds " +
                                     std::to_string(cu.back()) + " tokens, over the budget");
    }
    real += cu.back();
  }
  if (real != packed.real_tokens) return common::InvalidArgument("real_tokens is wrong");
  return common::Status::Ok();
}

}  // namespace engine::data
